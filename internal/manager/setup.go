// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package manager

import (
	"fmt"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"

	"github.com/aether-mesh/aether-operator/internal/cachewait"
	"github.com/aether-mesh/aether-operator/internal/controller"
	"github.com/aether-mesh/aether-operator/internal/registration"
	"github.com/aether-mesh/aether-operator/internal/routes"
	"github.com/aether-mesh/aether-operator/internal/webhook"
	"github.com/aether-mesh/aether-operator/internal/workloadidentity"
)

// Config is what a replica's controllers and webhooks are told.
type Config struct {
	// MeshDomain is the mesh's DNS domain and SPIFFE trust domain.
	MeshDomain string
	// Issuer says whether SPIRE issues workload identities (workloadidentity.NoIssuer: raw TCP refused).
	Issuer workloadidentity.Issuer
	// Ignored are the namespaces the mesh never takes.
	Ignored registration.IgnoredNamespaces
	// BatchWindow is the MeshService controller's (controller.MeshServiceReconciler.BatchWindow).
	BatchWindow time.Duration
	// Identity is what the pod webhook injects for workload identities (webhook.Identity).
	Identity webhook.Identity
}

// Options are the ctrl.Options of every replica, whatever its flags but workers (each
// controller's MaxConcurrentReconciles) and the election: the manager's bounded pod cache and
// its client (controller.CacheOptions, controller.ClientOptions), and each controller's sources
// started on followers too (EnableWarmup, see the package comment). The caller sets the servers'
// addresses.
func Options(workers int, election Election) ctrl.Options {
	o := ctrl.Options{
		Controller: config.Controller{MaxConcurrentReconciles: workers, EnableWarmup: new(true)},
		Cache:      controller.CacheOptions(),  // pods: managed ones only, trimmed for endpoint verification
		Client:     controller.ClientOptions(), // reads see the manager's own earlier writes; every write is the controller's
		NewClient:  cachewait.NewClient,        // ... within a bound
	}
	election.Apply(&o)
	return o
}

// Setup adds a replica's controllers, webhooks and probes to mgr, and returns the route kinds
// whose Gateway API CRDs the cluster does not serve (their controllers are skipped). A replica is
// ready once its webhook server serves, leader or not: the webhook Service sends admission to
// every ready replica.
func Setup(mgr ctrl.Manager, c Config) (skipped []routes.Kind, err error) {
	if err := (&controller.MeshServiceReconciler{
		Client:      mgr.GetClient(),
		Recorder:    mgr.GetEventRecorder("aether-controller"),
		MeshDomain:  c.MeshDomain,
		Issuer:      c.Issuer,
		Ignored:     c.Ignored,
		BatchWindow: c.BatchWindow,
	}).SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("setting up the MeshService controller: %w", err)
	}
	if skipped, err = controller.SetupRouteControllers(mgr); err != nil {
		return nil, fmt.Errorf("setting up the route controllers: %w", err)
	}
	if err := (&controller.EndpointPolicyReconciler{Client: mgr.GetClient()}).SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("setting up the EndpointPolicy controller: %w", err)
	}
	if err := (&controller.AccessPolicyReconciler{Client: mgr.GetClient(), TrustDomain: c.MeshDomain}).SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("setting up the AccessPolicy controller: %w", err)
	}
	webhook.SetupWithManager(mgr, webhook.Options{Ignored: c.Ignored, Identity: c.Identity})
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("webhook", mgr.GetWebhookServer().StartedChecker()); err != nil {
		return nil, err
	}
	return skipped, nil
}
