// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Package certrotation keeps the admission webhooks' serving certificate when cert-manager does
// not: open-policy-agent/cert-controller's rotator (what Gatekeeper runs) makes a CA and a serving
// certificate for the webhook Service, writes both into a Secret of the manager's namespace,
// renews them before they expire, and injects the CA into the webhook configurations' caBundle.
// The webhook server starts only once the certificate is in its directory and the CA injected
// (Gate), so a replica turns ready only when the API server can call it.
//
// It imports no other package of this repository; only cmd/manager and tests import it.
package certrotation

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
)

// The webhook configurations the rotator updates (their caBundle), by the names config/default
// and a release named aether-operator give them: update is restricted to these two; list and
// watch cannot be (the rotator's cache lists the kind cluster-wide).
//
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations;mutatingwebhookconfigurations,verbs=list;watch
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations,verbs=update,resourceNames=aether-operator-validating-webhook-configuration
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=mutatingwebhookconfigurations,verbs=update,resourceNames=aether-operator-mutating-webhook-configuration
//
// The Secret's verbs, in the manager's namespace only, are a Role: config/rbac/webhook_cert_role.yaml.

// Defaults: the names config/default gives the objects the rotation touches.
const (
	DefaultSecretName        = "aether-operator-webhook-server-cert"
	DefaultServiceName       = "aether-operator-webhook-service"
	DefaultValidatingWebhook = "aether-operator-validating-webhook-configuration"
	DefaultMutatingWebhook   = "aether-operator-mutating-webhook-configuration"
)

// Config names what the rotation keeps.
type Config struct {
	// Namespace is the manager's, where the Secret and the webhook Service are.
	Namespace string
	// SecretName is the Secret the certificate and its CA are written to (ca.crt, ca.key,
	// tls.crt, tls.key); the manager mounts it at CertDir.
	SecretName string
	// ServiceName is the webhook Service: the certificate is valid for <ServiceName>.<Namespace>.svc.
	ServiceName string
	// ValidatingWebhooks and MutatingWebhooks are the configurations whose webhooks get the CA.
	ValidatingWebhooks, MutatingWebhooks []string
	// CertDir is the webhook server's certificate directory, where the Secret is mounted.
	CertDir string
	// ExtraDNSNames are more names the certificate is valid for (a test's localhost).
	ExtraDNSNames []string
	// CheckEvery is how often the rotator checks the certificate (cert-controller's default, 12h, when 0).
	CheckEvery time.Duration
}

// Check reports the first field a rotation cannot run without, naming its flag.
func (c Config) Check() error {
	for _, f := range []struct{ flag, value, fix string }{
		{"POD_NAMESPACE", c.Namespace, "set it from the downward API (fieldRef metadata.namespace), as config/manager does"},
		{"--cert-rotation-secret", c.SecretName, "give the Secret the manager mounts at --webhook-cert-dir, " + DefaultSecretName + " by default"},
		{"--cert-rotation-service", c.ServiceName, "give the webhook Service's name, " + DefaultServiceName + " in config/default"},
		{"--webhook-cert-dir", c.CertDir, "give the directory the Secret is mounted at, /etc/aether/webhook-certs in config/manager"},
	} {
		if f.value == "" {
			return fmt.Errorf("--cert-rotation needs %s, which is empty: %s", f.flag, f.fix)
		}
	}
	if len(c.ValidatingWebhooks)+len(c.MutatingWebhooks) == 0 {
		return errors.New("--cert-rotation needs a webhook configuration to inject the CA into: give --cert-rotation-validating-webhooks or --cert-rotation-mutating-webhooks")
	}
	return nil
}

// DNSName is the name the API server dials the webhook Service by, the certificate's.
func (c Config) DNSName() string { return c.ServiceName + "." + c.Namespace + ".svc" }

// Rotation is one manager's rotation: make it with New, gate the webhook server with Gate before
// the manager is made, then Add it to the manager.
type Rotation struct {
	c     Config
	ready chan struct{}
}

// New returns the rotation c describes; c must pass Check.
func New(c Config) *Rotation { return &Rotation{c: c, ready: make(chan struct{})} }

// Ready is closed once the serving certificate is in CertDir and the CA in every webhook
// configuration.
func (r *Rotation) Ready() <-chan struct{} { return r.ready }

// Add adds the rotator to mgr. Every replica rotates (the webhook server runs on every replica,
// leader or not); a replica whose write loses the race reads the winner's Secret on its next
// check. The Secret must exist, made empty by the install (the rotator fills an existing Secret
// and never creates one, and the manager's Role may not create Secrets): Add says so when it
// does not.
func (r *Rotation) Add(ctx context.Context, mgr manager.Manager) error {
	c := r.c
	key := types.NamespacedName{Namespace: c.Namespace, Name: c.SecretName}
	// A plain client: the manager's may keep an informer of each kind it reads, which is
	// RestrictCache's business, not this one-off check's.
	direct, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return err
	}
	if err := secretExists(ctx, direct, key); err != nil {
		return err
	}
	var hooks []rotator.WebhookInfo
	for _, name := range c.ValidatingWebhooks {
		hooks = append(hooks, rotator.WebhookInfo{Name: name, Type: rotator.Validating})
	}
	for _, name := range c.MutatingWebhooks {
		hooks = append(hooks, rotator.WebhookInfo{Name: name, Type: rotator.Mutating})
	}
	err = rotator.AddRotator(narrowed(mgr, key), &rotator.CertRotator{
		SecretKey:              key,
		CertDir:                c.CertDir,
		CAName:                 "aether-webhook-ca",
		CAOrganization:         "aether",
		DNSName:                c.DNSName(),
		ExtraDNSNames:          append([]string{c.DNSName() + ".cluster.local"}, c.ExtraDNSNames...),
		IsReady:                r.ready,
		Webhooks:               hooks,
		FieldOwner:             "aether-cert-rotation",
		RequireLeaderElection:  false,
		RotationCheckFrequency: c.CheckEvery,
		ControllerName:         "webhook-cert-rotation",
	})
	if err != nil {
		return fmt.Errorf("adding the webhook certificate's rotator: %w", err)
	}
	return nil
}

// RestrictCache narrows the manager's cache of Secrets to the rotation's one Secret (its
// namespace, and the field selector metadata.name=<its name>). The rotator writes the Secret
// through the manager's client, and a client with read-your-writes consistency
// (controller.ClientOptions) keeps an informer of every kind it writes, in the manager's cache:
// an informer of more Secrets would need a list and watch the manager is not granted (its Role
// names its one Secret), never sync, and hold the write forever. Call it on the manager's options
// before the manager is made.
func (r *Rotation) RestrictCache(o *cache.Options) {
	if o.ByObject == nil {
		o.ByObject = map[client.Object]cache.ByObject{}
	}
	o.ByObject[&corev1.Secret{}] = cache.ByObject{Namespaces: map[string]cache.Config{
		r.c.Namespace: {FieldSelector: fields.OneTermEqualSelector("metadata.name", r.c.SecretName)},
	}}
}

// secretExists reports, as an error naming the Secret and the fix, that the Secret is missing or
// unreadable.
func secretExists(ctx context.Context, c client.Reader, key types.NamespacedName) error {
	err := c.Get(ctx, key, &corev1.Secret{})
	switch {
	case err == nil:
		return nil
	case apierrors.IsNotFound(err):
		return fmt.Errorf("the Secret %s, where --cert-rotation keeps the webhooks' certificate, does not exist: the install makes it, empty (config/manager/webhook_cert_secret.yaml, or the chart); apply it (kubectl -n %s create secret generic %s), or point --cert-rotation-secret at the one the install made", key, key.Namespace, key.Name)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("reading Secret %s, where --cert-rotation keeps the webhooks' certificate: %w (the Role webhook-cert-role grants get, list, watch and update on it by name: is --cert-rotation-secret the name the Role names?)", key, err)
	}
	return fmt.Errorf("reading Secret %s, where --cert-rotation keeps the webhooks' certificate: %w", key, err)
}

// Gate returns s, whose Start waits until Ready is closed: the server reads its certificate when
// it starts, and a replica must not turn ready (its readiness is the server's StartedChecker)
// before the API server trusts that certificate.
func (r *Rotation) Gate(s crwebhook.Server) crwebhook.Server {
	return gated{Server: s, ready: r.ready}
}

type gated struct {
	crwebhook.Server
	ready <-chan struct{}
}

func (g gated) Start(ctx context.Context) error {
	select {
	case <-g.ready:
	case <-ctx.Done():
		return nil
	}
	return g.Server.Start(ctx)
}
