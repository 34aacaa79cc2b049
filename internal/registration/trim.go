// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package registration

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// meshAnnotationDomain is the DNS domain of every annotation of the grammar
// (endpoint.aether.io/, metadata.endpoint.aether.io/, config.aether.io/).
const meshAnnotationDomain = "aether.io"

// Trim returns the part of pod that Registration and Verify read: name, namespace, UID,
// resourceVersion (the cache needs it), labels, the mesh's annotations, spec.nodeName,
// spec.serviceAccountName, the pod IPs and the phase (the SPIRE registrar drops a finished pod's
// node from its identity's entries). The manager caches managed pods through it, so its
// memory grows with the number of pods, not with the size of their specs (containers, volumes,
// env, managed fields). Trim of a trimmed pod is the same pod.
func Trim(pod *corev1.Pod) *corev1.Pod {
	return &corev1.Pod{
		TypeMeta: pod.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID, ResourceVersion: pod.ResourceVersion,
			Labels: pod.Labels, Annotations: meshAnnotations(pod.Annotations),
		},
		Spec:   corev1.PodSpec{NodeName: pod.Spec.NodeName, ServiceAccountName: pod.Spec.ServiceAccountName},
		Status: corev1.PodStatus{PodIP: pod.Status.PodIP, PodIPs: pod.Status.PodIPs, Phase: pod.Status.Phase},
	}
}

// meshAnnotations keeps every annotation in the mesh's domain, and so every one the parser
// reads, typos under its prefixes included (they make it refuse the pod, and Verify must see
// the same refusal the agent sees). Others (kubectl's last-applied configuration, above all)
// are dropped.
func meshAnnotations(annotations map[string]string) map[string]string {
	var out map[string]string
	for k, v := range annotations {
		domain, _, ok := strings.Cut(k, "/")
		if !ok || (domain != meshAnnotationDomain && !strings.HasSuffix(domain, "."+meshAnnotationDomain)) {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[k] = v
	}
	return out
}
