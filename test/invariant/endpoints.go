// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package invariant

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/conditions"
	"github.com/aether-mesh/aether-operator/internal/registration"
)

const kindMeshEndpoint = "MeshEndpoint"

// checkEndpoints: every running managed pod with an IP has exactly one MeshEndpoint, its
// registration; every MeshEndpoint has its managed pod and carries the controller's verdict.
func checkEndpoints(s snapshot, opts Options) []Violation {
	var out []Violation
	pods := map[client.ObjectKey]*corev1.Pod{}
	for i := range s.pods {
		pod := &s.pods[i]
		pods[client.ObjectKeyFromObject(pod)] = pod
		out = append(out, checkPodEndpoint(pod, s, opts)...)
	}
	for i := range s.endpoints {
		ep := &s.endpoints[i]
		if opts.Ignored.Ignores(ep.Namespace) {
			continue // never registered there, never counted (the controller says so: Verified)
		}
		pod := pods[client.ObjectKey{Namespace: ep.Namespace, Name: ep.Spec.PodName}]
		if pod == nil || !opts.Ignored.InMesh(pod) || string(pod.UID) != ep.Spec.PodUID {
			out = append(out, Violation{Check: CheckEndpoints, Kind: kindMeshEndpoint, Namespace: ep.Namespace, Name: ep.Name, Field: FieldObject,
				Want: fmt.Sprintf("none: no managed pod %s/%s of UID %s exists, so its agent removes it", ep.Namespace, ep.Spec.PodName, ep.Spec.PodUID),
				Got:  "a MeshEndpoint"})
		}
		out = append(out, checkVerdict(ep, s.verdict[client.ObjectKeyFromObject(ep)])...)
	}
	return out
}

// checkPodEndpoint checks the MeshEndpoints claiming pod, if it is a running managed pod with an
// IP whose annotations parse (one whose annotations do not is refused by its agent, with an
// Event, or keeps its last valid registration: neither is a lost endpoint).
func checkPodEndpoint(pod *corev1.Pod, s snapshot, opts Options) []Violation {
	if !opts.Ignored.InMesh(pod) || pod.Status.Phase != corev1.PodRunning || pod.Status.PodIP == "" {
		return nil
	}
	want, err := registration.Registration(pod, s.nodes[pod.Spec.NodeName])
	if err != nil {
		return nil
	}
	var claims []*meshv1alpha1.MeshEndpoint
	for i := range s.endpoints {
		ep := &s.endpoints[i]
		if ep.Namespace == pod.Namespace && (ep.Name == pod.Name || ep.Spec.PodName == pod.Name || ep.Spec.PodUID == string(pod.UID)) {
			claims = append(claims, ep)
		}
	}
	violation := func(name, field, want, got string) []Violation {
		return []Violation{{Check: CheckEndpoints, Kind: kindMeshEndpoint, Namespace: pod.Namespace, Name: name, Field: field, Want: want, Got: got}}
	}
	switch {
	case len(claims) == 0:
		return violation(pod.Name, FieldObject, fmt.Sprintf("the MeshEndpoint of running pod %s/%s (%s on node %s)", pod.Namespace, pod.Name, pod.Status.PodIP, pod.Spec.NodeName), "none")
	case len(claims) > 1:
		names := make([]string, len(claims))
		for i, ep := range claims {
			names[i] = ep.Name
		}
		return violation(pod.Name, "spec.podName", "one MeshEndpoint for pod "+pod.Name, fmt.Sprintf("%d: %s", len(claims), strings.Join(names, ", ")))
	case claims[0].Name != pod.Name:
		return violation(claims[0].Name, "metadata.name", pod.Name+" (a MeshEndpoint is named after its pod)", claims[0].Name)
	}
	return violations(CheckEndpoints, kindMeshEndpoint, pod.Namespace, pod.Name, diffFields("spec", want, claims[0].Spec))
}

// checkVerdict: ep's Verified condition is verdict, the controller's verdict on it now.
func checkVerdict(ep *meshv1alpha1.MeshEndpoint, verdict metav1.Condition) []Violation {
	verdict.Message = conditions.Truncate(verdict.Message, conditions.MaxConditionMessage)
	got := conditions.Find(ep.Status.Conditions, meshv1alpha1.EndpointConditionVerified)
	if got != nil && got.Status == verdict.Status && got.Reason == verdict.Reason && got.Message == verdict.Message {
		return nil
	}
	verdict.ObservedGeneration = ep.Generation
	return []Violation{{Check: CheckEndpoints, Kind: kindMeshEndpoint, Namespace: ep.Namespace, Name: ep.Name,
		Field: "status.conditions[" + meshv1alpha1.EndpointConditionVerified + "]", Want: describeCondition(&verdict), Got: describeCondition(got)}}
}
