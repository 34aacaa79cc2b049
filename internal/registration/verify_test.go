// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package registration

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/portspec"
)

// verifiedPod is a managed pod of ServiceAccount payments on node-a serving 8080 (HTTP) and
// 9000 (TCP), with one IPv4 and one IPv6 address.
func verifiedPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "payments-0", UID: "uid-0",
			Labels:      map[string]string{LabelManaged: ManagedValue},
			Annotations: map[string]string{portspec.AnnotationPorts: "8080,9000=tcp"}},
		Spec: corev1.PodSpec{NodeName: "node-a", ServiceAccountName: "payments"},
		Status: corev1.PodStatus{PodIP: "127.0.0.7",
			PodIPs: []corev1.PodIP{{IP: "127.0.0.7"}, {IP: "fd00::7"}}},
	}
}

// endpointOf is the MeshEndpoint the agent writes for pod.
func endpointOf(t *testing.T, pod *corev1.Pod) *meshv1alpha1.MeshEndpoint {
	t.Helper()
	spec, err := Registration(pod, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &meshv1alpha1.MeshEndpoint{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name}, Spec: spec}
}

func TestVerify(t *testing.T) {
	cases := map[string]struct {
		pod      func(*corev1.Pod) *corev1.Pod // changes the pod (nil result: no pod)
		endpoint func(*meshv1alpha1.MeshEndpoint)
		reason   string
		contains []string // in the message
	}{
		"the agent's own registration": {
			reason: meshv1alpha1.EndpointReasonPodMatches, contains: []string{"pod shop/payments-0 matches", "ports 8080/HTTP,9000/TCP"},
		},
		"the pod's second address (dual stack)": {
			endpoint: func(ep *meshv1alpha1.MeshEndpoint) { ep.Spec.Address = "fd00::7" },
			reason:   meshv1alpha1.EndpointReasonPodMatches,
		},
		"the same IPv6 address spelled otherwise": {
			endpoint: func(ep *meshv1alpha1.MeshEndpoint) { ep.Spec.Address = "fd00:0:0::7" },
			reason:   meshv1alpha1.EndpointReasonPodMatches,
		},
		"the default ServiceAccount": {
			pod:      func(p *corev1.Pod) *corev1.Pod { p.Spec.ServiceAccountName = ""; return p },
			endpoint: func(ep *meshv1alpha1.MeshEndpoint) { ep.Spec.ServiceName = "default" },
			reason:   meshv1alpha1.EndpointReasonPodMatches,
		},
		"annotations that no longer parse: identity only, and it says so": {
			pod: func(p *corev1.Pod) *corev1.Pod {
				p.Annotations = map[string]string{portspec.AnnotationPorts: "8080,9000=tpc"}
				return p
			},
			reason: meshv1alpha1.EndpointReasonPodMatches, contains: []string{"ports not checked: the pod's annotations do not parse"},
		},
		"no pod": {
			pod:    func(*corev1.Pod) *corev1.Pod { return nil },
			reason: meshv1alpha1.EndpointReasonPodNotFound, contains: []string{`no pod shop/payments-0 labelled aether.io/managed=true exists`, "delete it"},
		},
		"a pod that is not managed": {
			pod:    func(p *corev1.Pod) *corev1.Pod { p.Labels[LabelManaged] = "True"; return p },
			reason: meshv1alpha1.EndpointReasonPodNotFound, contains: []string{`no pod shop/payments-0 labelled aether.io/managed=true exists`},
		},
		"named after another pod": {
			endpoint: func(ep *meshv1alpha1.MeshEndpoint) { ep.Name = "payments-1" },
			reason:   meshv1alpha1.EndpointReasonPodNameMismatch, contains: []string{`spec.podName "payments-0" is not this MeshEndpoint's name "payments-1"`},
		},
		"another pod's UID": {
			endpoint: func(ep *meshv1alpha1.MeshEndpoint) { ep.Spec.PodUID = "uid-other" },
			reason:   meshv1alpha1.EndpointReasonPodUIDMismatch, contains: []string{`spec.podUID "uid-other" is not the UID of pod shop/payments-0 (uid-0)`},
		},
		"another node": {
			endpoint: func(ep *meshv1alpha1.MeshEndpoint) { ep.Spec.NodeName = "node-b" },
			reason:   meshv1alpha1.EndpointReasonNodeMismatch, contains: []string{`spec.nodeName "node-b" is not the node pod shop/payments-0 is bound to (node-a)`},
		},
		"a pod not scheduled yet": {
			pod:    func(p *corev1.Pod) *corev1.Pod { p.Spec.NodeName = ""; return p },
			reason: meshv1alpha1.EndpointReasonNodeMismatch, contains: []string{"is bound to (none yet)"},
		},
		"a made-up address": {
			endpoint: func(ep *meshv1alpha1.MeshEndpoint) { ep.Spec.Address = "10.9.9.9" },
			reason:   meshv1alpha1.EndpointReasonAddressMismatch, contains: []string{`spec.address "10.9.9.9" is not among the IPs of pod shop/payments-0 (127.0.0.7, fd00::7)`},
		},
		"a pod without an address yet": {
			pod:    func(p *corev1.Pod) *corev1.Pod { p.Status = corev1.PodStatus{}; return p },
			reason: meshv1alpha1.EndpointReasonAddressMismatch, contains: []string{"(none yet)"},
		},
		"another ServiceAccount": {
			endpoint: func(ep *meshv1alpha1.MeshEndpoint) { ep.Spec.ServiceName = "ledger" },
			reason:   meshv1alpha1.EndpointReasonServiceAccountMismatch, contains: []string{`spec.serviceName "ledger" is not the ServiceAccount of pod shop/payments-0 (payments)`, "not counted in MeshService ledger"},
		},
		"an extra port": {
			endpoint: func(ep *meshv1alpha1.MeshEndpoint) {
				ep.Spec.Ports = append(ep.Spec.Ports, meshv1alpha1.PortProtocol{Port: 9999, Protocol: meshv1alpha1.ProtocolTCP})
			},
			reason: meshv1alpha1.EndpointReasonPortsMismatch, contains: []string{"spec.ports 8080/HTTP,9000/TCP,9999/TCP (primary 8080) are not what the annotations of pod shop/payments-0 declare: 8080/HTTP,9000/TCP (primary 8080)"},
		},
		"a missing port": {
			endpoint: func(ep *meshv1alpha1.MeshEndpoint) { ep.Spec.Ports = ep.Spec.Ports[:1] },
			reason:   meshv1alpha1.EndpointReasonPortsMismatch,
		},
		"a retyped port": {
			endpoint: func(ep *meshv1alpha1.MeshEndpoint) { ep.Spec.Ports[1].Protocol = meshv1alpha1.ProtocolHTTP },
			reason:   meshv1alpha1.EndpointReasonPortsMismatch,
		},
		"another primary": {
			endpoint: func(ep *meshv1alpha1.MeshEndpoint) { ep.Spec.PrimaryPort = 9000 },
			reason:   meshv1alpha1.EndpointReasonPortsMismatch, contains: []string{"(primary 9000)"},
		},
		"several mismatches: the first is the reason, the message has all": {
			endpoint: func(ep *meshv1alpha1.MeshEndpoint) { ep.Spec.NodeName, ep.Spec.Address = "node-b", "10.9.9.9" },
			reason:   meshv1alpha1.EndpointReasonNodeMismatch, contains: []string{`spec.nodeName "node-b"`, `spec.address "10.9.9.9"`},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			pod := verifiedPod()
			ep := endpointOf(t, pod)
			if tc.endpoint != nil {
				tc.endpoint(ep)
			}
			if tc.pod != nil {
				pod = tc.pod(pod)
			}
			got := Verify(ep, pod)
			wantStatus := metav1.ConditionFalse
			if tc.reason == meshv1alpha1.EndpointReasonPodMatches {
				wantStatus = metav1.ConditionTrue
			}
			if got.Type != meshv1alpha1.EndpointConditionVerified || got.Status != wantStatus || got.Reason != tc.reason {
				t.Errorf("got %s=%s %s: %s\nwant %s %s", got.Type, got.Status, got.Reason, got.Message, wantStatus, tc.reason)
			}
			for _, want := range tc.contains {
				if !strings.Contains(got.Message, want) {
					t.Errorf("message %q\ndoes not contain %q", got.Message, want)
				}
			}
			if !got.LastTransitionTime.IsZero() || got.ObservedGeneration != 0 {
				t.Errorf("Verify stamped the condition (%v, %d): the writer does", got.LastTransitionTime, got.ObservedGeneration)
			}
		})
	}
}

func TestVerified(t *testing.T) {
	verdict := func(status metav1.ConditionStatus, observed int64) metav1.Condition {
		return metav1.Condition{Type: meshv1alpha1.EndpointConditionVerified, Status: status, Reason: "r", ObservedGeneration: observed}
	}
	cases := map[string]struct {
		conditions []metav1.Condition
		want       bool
	}{
		"True for the current generation":  {[]metav1.Condition{verdict(metav1.ConditionTrue, 3)}, true},
		"True for an earlier spec":         {[]metav1.Condition{verdict(metav1.ConditionTrue, 2)}, false},
		"False for the current generation": {[]metav1.Condition{verdict(metav1.ConditionFalse, 3)}, false},
		"no verdict yet":                   {nil, false},
		"only the agent's Registered": {[]metav1.Condition{{Type: meshv1alpha1.EndpointConditionRegistered,
			Status: metav1.ConditionTrue, ObservedGeneration: 3}}, false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ep := &meshv1alpha1.MeshEndpoint{ObjectMeta: metav1.ObjectMeta{Generation: 3},
				Status: meshv1alpha1.MeshEndpointStatus{Conditions: tc.conditions}}
			if got := Verified(ep); got != tc.want {
				t.Errorf("Verified = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestSquats(t *testing.T) {
	cases := map[string]struct {
		pod      func(*corev1.Pod) *corev1.Pod // changes the pod (nil result: no pod)
		endpoint func(*meshv1alpha1.MeshEndpoint)
		want     bool
	}{
		"the pod's own endpoint": {},
		"another node's, the pod's UID": {
			endpoint: func(ep *meshv1alpha1.MeshEndpoint) { ep.Spec.NodeName = "node-b" }, want: true,
		},
		"another node's, another UID and pod name": {
			endpoint: func(ep *meshv1alpha1.MeshEndpoint) {
				ep.Spec.NodeName, ep.Spec.PodUID, ep.Spec.PodName = "node-b", "uid-forged", "elsewhere"
			}, want: true,
		},
		"the pod's node, an earlier pod's UID (that node's agent replaces it)": {
			endpoint: func(ep *meshv1alpha1.MeshEndpoint) { ep.Spec.PodUID = "uid-earlier" },
		},
		"no pod of that name": {
			pod:      func(*corev1.Pod) *corev1.Pod { return nil },
			endpoint: func(ep *meshv1alpha1.MeshEndpoint) { ep.Spec.NodeName = "node-b" },
		},
		"a pod not yet bound to a node": {
			pod:      func(p *corev1.Pod) *corev1.Pod { p.Spec.NodeName = ""; return p },
			endpoint: func(ep *meshv1alpha1.MeshEndpoint) { ep.Spec.NodeName = "node-b" },
		},
		"a pod that is not managed": {
			pod:      func(p *corev1.Pod) *corev1.Pod { p.Labels = nil; return p },
			endpoint: func(ep *meshv1alpha1.MeshEndpoint) { ep.Spec.NodeName = "node-b" },
		},
		"a pod of another name": {
			pod:      func(p *corev1.Pod) *corev1.Pod { p.Name = "payments-1"; return p },
			endpoint: func(ep *meshv1alpha1.MeshEndpoint) { ep.Spec.NodeName = "node-b" },
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			pod := verifiedPod()
			ep := endpointOf(t, pod)
			if tc.pod != nil {
				pod = tc.pod(pod)
			}
			if tc.endpoint != nil {
				tc.endpoint(ep)
			}
			if got := Squats(ep, pod); got != tc.want {
				t.Errorf("Squats = %v, want %v", got, tc.want)
			}
		})
	}
}
