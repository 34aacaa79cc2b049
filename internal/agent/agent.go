// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/proxyconfig"
	"github.com/aether-mesh/aether-operator/internal/registration"
)

// CacheOptions limit what the agent's manager caches to its own node: its pods (field selector
// spec.nodeName), its MeshEndpoints (the CRD's selectable field spec.nodeName) and its Node;
// managed fields are stripped. An agent's memory grows with its node, not with the cluster. With
// Unix socket delivery on (UDSOptions), it also holds the EndpointPolicies, few, and each
// Service's name and selector only.
func CacheOptions(nodeName string) cache.Options {
	return cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}:                {Field: fields.OneTermEqualSelector("spec.nodeName", nodeName)},
			&meshv1alpha1.MeshEndpoint{}: {Field: fields.OneTermEqualSelector("spec.nodeName", nodeName)},
			&corev1.Node{}:               {Field: fields.OneTermEqualSelector("metadata.name", nodeName)},
			// Read only with UDS delivery on, for their selectors (which pods a policy's Service
			// selects): the rest of each Service is dropped.
			&corev1.Service{}: {Transform: slimService},
		},
	}
}

// slimService keeps of a Service what the agent reads: its name and its selector.
func slimService(obj any) (any, error) {
	svc, ok := obj.(*corev1.Service)
	if !ok {
		return obj, nil // a tombstone
	}
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: svc.Namespace, Name: svc.Name, UID: svc.UID,
		ResourceVersion: svc.ResourceVersion}, Spec: corev1.ServiceSpec{Selector: svc.Spec.Selector}}, nil
}

// ClientOptions are the agent's client options: every write carries FieldManager, the status
// patches of its registration and of its health probes too (without it, the API server names an
// update's manager after the client's user agent, the binary's name). managedFields then tell
// the agent's writes apart from anyone else's, which test/invariant checks.
//
// Its reads from the cache wait until the cache has seen the agent's own earlier writes
// (controller-runtime's read-your-writes consistency), as the manager's do: the reconcile that
// the create of a new endpoint brings then reads the endpoint with the status written right
// after the create, not the bare create. Without it, that reconcile found the status missing,
// wrote it again from the older object and lost (a conflict), often twice; and the reconcile
// that an endpoint's deletion brought deleted it again (not found): at 100x10 under churn
// (hack/bench, latency), 388 of the agents' 701 status writes were such conflicts. A write of a
// kind the agent does not cache must not be tracked (createEvent): tracking starts an informer
// for the kind.
func ClientOptions() client.Options {
	return client.Options{Cache: &client.CacheOptions{EnableReadYourWritesConsistency: new(true)}, FieldOwner: FieldManager}
}

// Options configure the agent.
type Options struct {
	// NodeName is the node the agent serves.
	NodeName string
	// Health tunes delegated liveness.
	Health HealthOptions
	// IgnoredNamespaces are never registered, whatever their pods' labels.
	IgnoredNamespaces registration.IgnoredNamespaces
	// View, when set (NewView), is the cluster-wide view of MeshServices and MeshEndpoints that
	// the xDS builder reads; Setup runs it with the manager. Nil by default: an agent without it
	// keeps only its own node's objects in memory.
	View *View
	// XDS, when set, serves the node's Envoy configuration built from View (which must be set
	// too) and the node's pods. Nil by default (the agent binary sets it unless --xds-address is
	// empty).
	XDS *XDSOptions
	// CNI, when set, answers the CNI plugin (cmd/cni) on its unix socket and records each meshed
	// pod's network namespace (and programs its capture, with CNI.Capture) before the plugin's ADD
	// returns. Nil by default (the agent binary sets it unless --cni-socket is empty).
	CNI *CNIOptions
	// CNIInstall, when set, keeps the plugin installed on the node (its binary, its conflist entry
	// and its kubeconfig) while the agent runs. Nil by default (the agent binary sets it when
	// --cni-conf-dir is set: in the DaemonSet).
	CNIInstall *CNIInstallOptions
	// UDS configures delivery to the pods' Unix sockets; the zero value delivers every pod over
	// TCP (a pod that declares a socket is counted as disabled).
	UDS UDSOptions
	// EndpointTimes, when set, records when each of the node's endpoints turned Healthy and when
	// the node's published snapshot held or dropped each endpoint, and the metrics server serves
	// it at EndpointTimesPath. Nil by default (--debug-endpoint-times).
	EndpointTimes *EndpointTimes

	// clock times drain phase 2; the real clock when nil (tests step a fake one).
	clock clock.WithDelayedExecution

	// controllerName replaces "agent-pods" as the controller's name in logs and metrics, for
	// tests that run several agents in one process and count each one's reconciles.
	controllerName string
}

// Setup adds the agent's loops to mgr, whose cache must come from CacheOptions(o.NodeName).
func Setup(mgr ctrl.Manager, o Options) error {
	if o.XDS != nil && o.View == nil {
		return errNoView
	}
	uds := newUDSResolver(mgr.GetCache(), o.UDS, mgr.GetLogger())
	if err := (&PodReconciler{
		uds:            uds,
		Client:         mgr.GetClient(),
		apiReader:      mgr.GetAPIReader(),
		NodeName:       o.NodeName,
		Ignored:        o.IgnoredNamespaces,
		Health:         o.Health,
		times:          o.EndpointTimes,
		controllerName: o.controllerName,
		Clock:          o.clock,
	}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := mgr.Add(&Prober{Client: mgr.GetClient(), NodeName: o.NodeName, Options: o.Health, times: o.EndpointTimes, uds: uds}); err != nil {
		return err
	}
	if o.EndpointTimes != nil {
		if err := mgr.AddMetricsServerExtraHandler(EndpointTimesPath, o.EndpointTimes); err != nil {
			return err
		}
	}
	if o.View != nil {
		if err := mgr.Add(o.View); err != nil {
			return err
		}
	}
	if o.CNI != nil && o.CNI.NetNS == nil {
		cniOptions := *o.CNI
		cniOptions.NetNS = NewNetNS()
		o.CNI = &cniOptions
	}
	var pub *publisher
	if o.XDS != nil {
		if o.CNI != nil && o.XDS.NetNS == nil {
			xdsOptions := *o.XDS
			xdsOptions.NetNS = o.CNI.NetNS // what the plugin hands over is what Envoy's listeners use
			o.XDS = &xdsOptions
		}
		if err := mgr.Add(o.XDS.Server); err != nil {
			return err
		}
		if err := indexPodUIDs(context.Background(), mgr.GetFieldIndexer()); err != nil {
			return fmt.Errorf("indexing pods by UID (the proxyless socket's callers): %w", err)
		}
		pub = newPublisher(mgr.GetCache(), mgr.GetClient(), mgr.GetLogger(), o)
		pub.uds = uds
		if err := mgr.Add(pub); err != nil {
			return err
		}
		if o.XDS.ProxyConfig {
			handler := proxyconfig.Handler(o.NodeName, o.XDS.Server, pub.whyLeftOut)
			if err := mgr.AddMetricsServerExtraHandler(proxyconfig.Path, handler); err != nil {
				return err
			}
		}
		if err := setupIdentities(mgr, o, pub.opts.MeshDomain); err != nil {
			return err
		}
	}
	if o.CNI != nil {
		if o.CNI.Capture == nil && pub != nil && pub.capture != nil {
			// The plugin's ADD returns only once the pod's capture holds (XDSOptions.Capture).
			cniOptions := *o.CNI
			cniOptions.Capture = cniCapture{pub.capture}
			o.CNI = &cniOptions
		}
		if err := mgr.Add(newCNIServer(mgr.GetClient(), mgr.GetAPIReader(), mgr.GetLogger(), o)); err != nil {
			return err
		}
	}
	if o.CNIInstall != nil {
		if err := mgr.Add(&cniKeeper{opts: *o.CNIInstall, log: mgr.GetLogger().WithName("cni-install")}); err != nil {
			return err
		}
	}
	return nil
}

// setupIdentities runs o.XDS.Identities and the publisher of its secrets, if set.
func setupIdentities(mgr ctrl.Manager, o Options, domain string) error {
	if o.XDS.Identities == nil {
		return nil
	}
	if td := o.XDS.Identities.TrustDomain().Name(); td != domain {
		return fmt.Errorf("the identity source's trust domain is %q and the mesh domain %q: the SPIFFE IDs the clusters pin are of the mesh domain; make them one", td, domain)
	}
	if err := mgr.Add(o.XDS.Identities); err != nil {
		return err
	}
	return mgr.Add(&secretsPublisher{source: o.XDS.Identities, server: o.XDS.Server, node: o.NodeName, domain: domain,
		log: mgr.GetLogger().WithName("sds")})
}
