// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package webhook

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/aether-mesh/aether-operator/internal/portspec"
	"github.com/aether-mesh/aether-operator/internal/registration"
)

// PodPath is where the pod validator is served; config/webhook names the same path.
const PodPath = "/validate--v1-pod"

// JudgeDeadline is how long the validator takes at most to judge one pod: well inside the
// webhook's timeoutSeconds (5, config/webhook), past which the API server would admit the pod
// unjudged (failurePolicy Ignore). Parsing is bounded by input size and takes milliseconds even
// for 256 KiB of annotations (portspec.BenchmarkParseHostile); the deadline is the second line.
const JudgeDeadline = 2 * time.Second

// PodValidator judges the pods that carry the label aether.io/managed (the webhook
// configuration's objectSelector: an unlabelled pod never reaches it).
//
//   - aether.io/managed: "true" — the pod is in the mesh: its annotations are parsed by
//     internal/portspec and a pod whose annotations do not parse is denied with the parser's
//     error, verbatim (it names the annotation, the token and the fix, and for the reserved
//     ports explains what they are). A pod running as the `default` ServiceAccount (named or
//     unset) is denied first, with registration.DefaultServiceAccountError: its service would be
//     called "default". Annotation keys that look like a misspelling of the
//     grammar's are returned as warnings; warnings never deny. Its socket delivery is judged
//     against its volumes: endpoint.aether.io/uds-socket must name its one csi.aether.io volume,
//     and such a volume needs spec.securityContext.fsGroup.
//   - any other value ("True", "yes", "1") — the pod is not in the mesh (the agent selects
//     "true" only): it is admitted with a warning that says so, and its annotations are not
//     judged.
//
// An UPDATE is judged only when it can change what the mesh reads: a key of the grammar changed
// (portspec.IsGrammarKey), or the label turned to "true". A pod admitted while the webhook was
// down must still accept every other update (its controllers' finalizers, owner references,
// labels, `kubectl rollout restart`'s annotation), or it could never be cleaned up.
//
// The webhook configuration uses failurePolicy Ignore, on purpose: a manager outage must not
// stop every rollout of every meshed workload. A pod admitted while the webhook was down is
// refused by its node agent instead (no MeshEndpoint, a Warning Event, a metric): the second
// line of defence. A pod the validator cannot judge within JudgeDeadline is denied, not left to
// the API server's timeout (which would admit it).
type PodValidator struct {
	Decoder admission.Decoder
	// Ignored are the namespaces the mesh never takes: their pods are admitted unjudged. The
	// webhook configuration's namespaceSelector keeps them away already; this is the same rule
	// where the configuration and the manager's flag disagree.
	Ignored registration.IgnoredNamespaces
}

// Handle admits or denies one pod CREATE or UPDATE.
func (v *PodValidator) Handle(ctx context.Context, req admission.Request) admission.Response {
	pod := &corev1.Pod{}
	if err := v.Decoder.Decode(req, pod); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	var old *corev1.Pod
	if req.Operation == admissionv1.Update {
		old = &corev1.Pod{}
		if err := v.Decoder.DecodeRaw(req.OldObject, old); err != nil {
			return admission.Errored(http.StatusBadRequest, err)
		}
	}
	if v.Ignored.Ignores(req.Namespace) {
		return admission.Allowed("namespace " + req.Namespace + " is not part of the mesh (--ignored-namespaces)")
	}
	return review(ctx, pod, old)
}

// review is the validator's rule for pod, and old on an UPDATE (nil on a CREATE).
func review(ctx context.Context, pod, old *corev1.Pod) admission.Response {
	value, labelled := pod.Labels[portspec.LabelManaged]
	switch {
	case !labelled:
		return admission.Allowed("not managed: the label was removed")
	case !portspec.IsManaged(pod.Labels):
		if old != nil && old.Labels[portspec.LabelManaged] == value {
			return admission.Allowed("not managed") // warned when the label got this value
		}
		return admission.Allowed("not managed").WithWarnings(portspec.NotManagedWarning(value))
	}

	var warnings []string
	if old == nil || !equalOn(old.Annotations, pod.Annotations, func(string) bool { return true }) {
		warnings = portspec.Warnings(pod.Annotations)
	}
	if old != nil && portspec.IsManaged(old.Labels) && equalOn(old.Annotations, pod.Annotations, portspec.IsGrammarKey) {
		return admission.Allowed("mesh annotations unchanged").WithWarnings(warnings...)
	}
	if err := judge(ctx, JudgeDeadline, func() error { return judgeSpec(pod) }); err != nil {
		return admission.Denied(err.Error()).WithWarnings(warnings...)
	}
	return admission.Allowed("").WithWarnings(warnings...)
}

// judgeSpec is every problem of pod at once: its ServiceAccount and annotations
// (registration.Problems) and its socket delivery against its volumes (registration.
// CheckUDSSocket, CheckUDSVolumes: the one csi.aether.io volume, with an fsGroup, and the
// annotation naming it), judged when its annotations parse.
func judgeSpec(pod *corev1.Pod) error {
	spec, problems := registration.Problems(pod)
	var invalid portspec.ErrorList
	switch {
	case errors.As(problems, &invalid):
		return problems // the socket's annotation may be among what does not parse
	case spec.UDSSocket != nil:
		return errors.Join(problems, registration.CheckUDSSocket(pod, portspec.AnnotationUDSSocket, *spec.UDSSocket))
	}
	return errors.Join(problems, registration.CheckUDSVolumes(pod))
}

// equalOn reports whether a and b hold the same keys and values among the keys for which in
// holds.
func equalOn(a, b map[string]string, in func(string) bool) bool {
	for k, va := range a {
		if vb, ok := b[k]; in(k) && (!ok || va != vb) {
			return false
		}
	}
	for k := range b {
		if _, ok := a[k]; in(k) && !ok {
			return false
		}
	}
	return true
}

// judge runs parse and returns its error, or a deadline error when it has not finished within
// deadline (or ctx ends first): a pod that cannot be judged in time is denied, never admitted
// unjudged. A parse still running then finishes in the background; its cost is bounded by the
// annotations' caps.
func judge(ctx context.Context, deadline time.Duration, parse func() error) error {
	ctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- parse() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("the pod's mesh annotations could not be judged within %v, so the pod is denied rather than "+
			"admitted unchecked (keep each mesh annotation within its length cap, for example %d bytes for %s, and apply again)",
			deadline, portspec.MaxPortsLength, portspec.AnnotationPorts)
	}
}

// Options configure the pod webhooks.
type Options struct {
	// Ignored are the namespaces the mesh never takes (the manager's --ignored-namespaces).
	Ignored registration.IgnoredNamespaces
	// Identity is what the injector gives mesh pods of their SPIRE identity (DefaultIdentity).
	Identity Identity
}

// SetupWithManager serves the pod validator, the pod injector and the EndpointPolicy and
// AccessPolicy validators on the manager's webhook server.
func SetupWithManager(mgr manager.Manager, o Options) {
	decoder := admission.NewDecoder(mgr.GetScheme())
	mgr.GetWebhookServer().Register(PodPath, &crwebhook.Admission{Handler: &PodValidator{Decoder: decoder, Ignored: o.Ignored}})
	mgr.GetWebhookServer().Register(EndpointPolicyPath, &crwebhook.Admission{Handler: &EndpointPolicyValidator{Decoder: decoder}})
	mgr.GetWebhookServer().Register(AccessPolicyPath, &crwebhook.Admission{Handler: &AccessPolicyValidator{Decoder: decoder}})
	mgr.GetWebhookServer().Register(InjectPath, &crwebhook.Admission{Handler: &PodInjector{Decoder: decoder, Ignored: o.Ignored, Identity: o.Identity}})
}
