// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package webhook

import (
	"context"
	"maps"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/aether-mesh/aether-operator/internal/portspec"
)

// PodPath is where the pod validator is served; config/webhook names the same path.
const PodPath = "/validate--v1-pod"

// PodValidator denies a managed pod (label aether.io/managed: "true", selected by the webhook
// configuration's objectSelector, so other pods never reach it) whose annotations do not parse.
// The denial is the parser's error, verbatim: it names the annotation, the token and the fix,
// and for the reserved ports explains what they are.
//
// The webhook configuration uses failurePolicy Ignore, on purpose: a manager outage must not
// stop every rollout of every meshed workload. A pod admitted while the webhook was down is
// refused by its node agent instead (no MeshEndpoint, a Warning Event, a metric): the second
// line of defence.
type PodValidator struct {
	Decoder admission.Decoder
}

// Handle admits or denies one pod CREATE or UPDATE.
func (v *PodValidator) Handle(_ context.Context, req admission.Request) admission.Response {
	pod := &corev1.Pod{}
	if err := v.Decoder.Decode(req, pod); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if req.Operation == admissionv1.Update {
		old := &corev1.Pod{}
		if err := v.Decoder.DecodeRaw(req.OldObject, old); err != nil {
			return admission.Errored(http.StatusBadRequest, err)
		}
		// Only a change of annotations is judged: a pod admitted while the webhook was down must
		// still accept its controllers' other updates (finalizers, owner references, labels), or
		// it could never be cleaned up.
		if maps.Equal(old.Annotations, pod.Annotations) {
			return admission.Allowed("annotations unchanged")
		}
	}
	if _, err := portspec.Parse(pod.Annotations); err != nil {
		return admission.Denied(err.Error())
	}
	return admission.Allowed("")
}

// SetupWithManager serves the pod validator on the manager's webhook server.
func SetupWithManager(mgr manager.Manager) {
	mgr.GetWebhookServer().Register(PodPath, &crwebhook.Admission{Handler: &PodValidator{Decoder: admission.NewDecoder(mgr.GetScheme())}})
}
