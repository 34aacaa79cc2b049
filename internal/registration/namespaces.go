// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package registration

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
)

// DefaultIgnoredNamespaces are the namespaces the mesh never takes, whatever their pods' labels:
// Kubernetes' own, and the operator's (config/default deploys it to aether-operator-system; the
// manager and agent also add the namespace they run in, from the downward API). A mesh that
// captured the API server's or DNS's traffic, or its own, could lock itself out.
var DefaultIgnoredNamespaces = []string{"kube-system", "kube-public", "kube-node-lease", "aether-operator-system"}

// IgnoredNamespaces is the set of namespaces the mesh never takes.
type IgnoredNamespaces map[string]bool

// ParseIgnoredNamespaces reads a comma-separated list of namespace names (the
// --ignored-namespaces flag), naming the first bad element and the fix.
func ParseIgnoredNamespaces(list string) (IgnoredNamespaces, error) {
	ignored := IgnoredNamespaces{}
	for name := range strings.SplitSeq(list, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
			return nil, fmt.Errorf("--ignored-namespaces: %q is not a namespace name (%s); list namespace names separated by commas, for example %q",
				name, strings.Join(errs, "; "), strings.Join(DefaultIgnoredNamespaces, ","))
		}
		ignored[name] = true
	}
	return ignored, nil
}

// With returns the set with namespace added (the one the component runs in); an empty name adds
// nothing.
func (i IgnoredNamespaces) With(namespace string) IgnoredNamespaces {
	out := IgnoredNamespaces{}
	for n := range i {
		out[n] = true
	}
	if namespace != "" {
		out[namespace] = true
	}
	return out
}

// Ignores reports whether the mesh never takes pods of namespace.
func (i IgnoredNamespaces) Ignores(namespace string) bool { return i[namespace] }

// String lists the set, sorted, comma-separated (as the flag takes it).
func (i IgnoredNamespaces) String() string {
	names := make([]string, 0, len(i))
	for n := range i {
		names = append(names, n)
	}
	slices.Sort(names)
	return strings.Join(names, ",")
}

// InMesh reports whether pod is in the mesh: labelled aether.io/managed=true, in a namespace the
// mesh takes.
func (i IgnoredNamespaces) InMesh(pod *corev1.Pod) bool {
	return Managed(pod) && !i.Ignores(pod.Namespace)
}

// Verdict is InMesh with the reason, for those who must say why a pod is or is not taken (the
// node agent's answer to the CNI plugin, and the plugin's own when the agent is unreachable).
func (i IgnoredNamespaces) Verdict(pod *corev1.Pod) (inMesh bool, why string) {
	value, labelled := pod.Labels[LabelManaged]
	switch {
	case i.Ignores(pod.Namespace):
		return false, fmt.Sprintf("namespace %s is ignored by the mesh (--ignored-namespaces)", pod.Namespace)
	case !labelled:
		return false, fmt.Sprintf("it has no label %s", LabelManaged)
	case !Managed(pod):
		return false, fmt.Sprintf("its label %s is %q, not %q", LabelManaged, value, ManagedValue)
	}
	return true, fmt.Sprintf("it is labelled %s=%s", LabelManaged, ManagedValue)
}

// IgnoredVerdict is the Verified condition of a MeshEndpoint in an ignored namespace: never
// counted, whatever pod it names.
func IgnoredVerdict(ep *meshv1alpha1.MeshEndpoint) metav1.Condition {
	return metav1.Condition{Type: meshv1alpha1.EndpointConditionVerified, Status: metav1.ConditionFalse,
		Reason: meshv1alpha1.EndpointReasonNamespaceIgnored,
		Message: fmt.Sprintf("not counted in MeshService %s: namespace %s is not part of the mesh (the manager's --ignored-namespaces); "+
			"no agent registers pods here. Move the workload to another namespace, or delete this MeshEndpoint", ep.Spec.ServiceName, ep.Namespace)}
}
