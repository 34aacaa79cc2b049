// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package registration

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/portspec"
)

// mismatch is one field of a MeshEndpoint that its pod contradicts.
type mismatch struct {
	reason, message string
}

// Verify is the Verified condition of ep given pod, the pod of the same namespace named by ep's
// spec.podName (nil when there is none; one that is not Managed counts as none). True only when the pod matches every field a
// MeshService counts: ep is named after the pod, same UID, bound to the same node, ep's address
// among the pod's IPs, ep's service the pod's ServiceAccount, and ep's ports and primary port
// those the pod's annotations declare. While the annotations do not parse, the agent keeps the
// last valid registration in service (Registered=False), so only the identity is checked then,
// and the message says so. False carries the first mismatch as its reason and every mismatch in
// its message. No timestamps: the writer stamps them (conditions.Set).
func Verify(ep *meshv1alpha1.MeshEndpoint, pod *corev1.Pod) metav1.Condition {
	out := metav1.Condition{Type: meshv1alpha1.EndpointConditionVerified}
	if pod != nil && !Managed(pod) {
		pod = nil // not in the mesh: as good as none, whatever a cache holds
	}
	found, portsChecked := identityMismatches(ep, pod), false
	if pod != nil {
		var portsWrong *mismatch
		portsWrong, portsChecked = portsMismatch(ep, pod)
		if portsWrong != nil {
			found = append(found, *portsWrong)
		}
	}
	if len(found) > 0 {
		messages := make([]string, len(found))
		for i, m := range found {
			messages[i] = m.message
		}
		out.Status, out.Reason = metav1.ConditionFalse, found[0].reason
		out.Message = "not counted in MeshService " + ep.Spec.ServiceName + ": " + strings.Join(messages, "; ") +
			". The node agent writes the MeshEndpoint of each managed pod of its node; one that matches no pod is stale or forged: delete it"
		return out
	}
	out.Status, out.Reason = metav1.ConditionTrue, meshv1alpha1.EndpointReasonPodMatches
	out.Message = fmt.Sprintf("pod %s/%s matches: UID, node %s, address %s, ServiceAccount %s", pod.Namespace, pod.Name,
		ep.Spec.NodeName, ep.Spec.Address, ep.Spec.ServiceName)
	if portsChecked {
		out.Message += " and ports " + meshv1alpha1.FormatPorts(ep.Spec.Ports)
	} else {
		out.Message += "; ports not checked: the pod's annotations do not parse, and the node agent keeps the last valid registration in service (see Registered)"
	}
	return out
}

// identityMismatches compares who ep says it is with who pod is.
func identityMismatches(ep *meshv1alpha1.MeshEndpoint, pod *corev1.Pod) []mismatch {
	var out []mismatch
	add := func(reason, format string, args ...any) {
		out = append(out, mismatch{reason, fmt.Sprintf(format, args...)})
	}
	s := ep.Spec
	if ep.Name != s.PodName {
		add(meshv1alpha1.EndpointReasonPodNameMismatch, "spec.podName %q is not this MeshEndpoint's name %q (a MeshEndpoint is named after its pod)", s.PodName, ep.Name)
	}
	if pod == nil {
		add(meshv1alpha1.EndpointReasonPodNotFound, "no pod %s/%s labelled %s=%s exists", ep.Namespace, s.PodName, LabelManaged, ManagedValue)
		return out
	}
	if string(pod.UID) != s.PodUID {
		add(meshv1alpha1.EndpointReasonPodUIDMismatch, "spec.podUID %q is not the UID of pod %s/%s (%s)", s.PodUID, pod.Namespace, pod.Name, pod.UID)
	}
	if pod.Spec.NodeName != s.NodeName {
		add(meshv1alpha1.EndpointReasonNodeMismatch, "spec.nodeName %q is not the node pod %s/%s is bound to (%s)", s.NodeName, pod.Namespace, pod.Name, orNone(pod.Spec.NodeName, "none yet"))
	}
	if ips := podIPs(pod); !slices.ContainsFunc(ips, sameIP(s.Address)) {
		add(meshv1alpha1.EndpointReasonAddressMismatch, "spec.address %q is not among the IPs of pod %s/%s (%s)", s.Address, pod.Namespace, pod.Name, orNone(strings.Join(ips, ", "), "none yet"))
	}
	if sa := ServiceAccount(pod); sa != s.ServiceName {
		add(meshv1alpha1.EndpointReasonServiceAccountMismatch, "spec.serviceName %q is not the ServiceAccount of pod %s/%s (%s)", s.ServiceName, pod.Namespace, pod.Name, sa)
	}
	return out
}

// portsMismatch compares ep's ports and primary port with what the one parser reads from pod's
// annotations. checked is false when they do not parse: nothing to compare with.
func portsMismatch(ep *meshv1alpha1.MeshEndpoint, pod *corev1.Pod) (wrong *mismatch, checked bool) {
	spec, err := portspec.Parse(pod.Annotations)
	if err != nil {
		return nil, false
	}
	if spec.Primary == ep.Spec.PrimaryPort && slices.Equal(spec.Ports, ep.Spec.Ports) {
		return nil, true
	}
	return &mismatch{meshv1alpha1.EndpointReasonPortsMismatch, fmt.Sprintf(
		"spec.ports %s (primary %d) are not what the annotations of pod %s/%s declare: %s (primary %d)",
		orNone(meshv1alpha1.FormatPorts(ep.Spec.Ports), "none"), ep.Spec.PrimaryPort, pod.Namespace, pod.Name,
		meshv1alpha1.FormatPorts(spec.Ports), spec.Primary)}, true
}

// podIPs are the pod's addresses: status.podIPs, and status.podIP (the first of them, or the
// only one a single-stack API server reports).
func podIPs(pod *corev1.Pod) []string {
	var out []string
	if pod.Status.PodIP != "" {
		out = append(out, pod.Status.PodIP)
	}
	for _, ip := range pod.Status.PodIPs {
		if !slices.Contains(out, ip.IP) {
			out = append(out, ip.IP)
		}
	}
	return out
}

// sameIP matches addresses that are the same IP however spelled (an IPv6 address has several
// spellings; the API accepts any of them).
func sameIP(address string) func(string) bool {
	want, err := netip.ParseAddr(address)
	return func(ip string) bool {
		got, gotErr := netip.ParseAddr(ip)
		if err != nil || gotErr != nil {
			return ip == address
		}
		return got.Unmap() == want.Unmap()
	}
}

func orNone(s, none string) string {
	if s == "" {
		return none
	}
	return s
}

// Verified reports whether ep stands verified as it is now: the controller's Verified=True,
// observed at ep's current generation. An endpoint whose spec changed since its verdict (its
// generation moved on) does not count until the controller verifies it again: the verdict was
// about another spec. Only the controller writes Verified (config/admission denies the agent).
func Verified(ep *meshv1alpha1.MeshEndpoint) bool {
	for _, c := range ep.Status.Conditions {
		if c.Type == meshv1alpha1.EndpointConditionVerified {
			return c.Status == metav1.ConditionTrue && c.ObservedGeneration == ep.Generation
		}
	}
	return false
}

// Squats reports whether ep holds the name of pod, the managed pod of ep's name, while naming
// another node than the one pod is bound to. A MeshEndpoint is named after its pod, so while such
// an endpoint exists the agent of the pod's node cannot create the pod's own (AlreadyExists), and
// cannot remove it either (the node-authority policy lets it touch only its own node's
// endpoints): the controller deletes it. An endpoint naming the pod's own node is that node
// agent's to correct, and a pod not yet bound to a node has no agent waiting for its name.
func Squats(ep *meshv1alpha1.MeshEndpoint, pod *corev1.Pod) bool {
	return pod != nil && Managed(pod) && pod.Namespace == ep.Namespace && pod.Name == ep.Name &&
		pod.Spec.NodeName != "" && pod.Spec.NodeName != ep.Spec.NodeName
}
