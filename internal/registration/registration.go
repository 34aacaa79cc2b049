// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package registration

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/portspec"
)

// LabelManaged opts a pod into the mesh; only the value ManagedValue counts as on. The rule is
// portspec's (the grammar of what a pod says about its place in the mesh).
const (
	LabelManaged = portspec.LabelManaged
	ManagedValue = portspec.ManagedValue
)

// Topology labels a node's locality is read from.
const (
	LabelRegion = "topology.kubernetes.io/region"
	LabelZone   = "topology.kubernetes.io/zone"
)

// DefaultServiceAccount is the ServiceAccount of a pod that names none.
const DefaultServiceAccount = "default"

// ErrNoAddress means the pod has no IP yet; it is registered once it has one.
var ErrNoAddress = errors.New("the pod has no IP address yet")

// Managed reports whether pod opted into the mesh.
func Managed(pod *corev1.Pod) bool { return portspec.IsManaged(pod.Labels) }

// ServiceAccount is the pod's ServiceAccount, which is its service's name.
func ServiceAccount(pod *corev1.Pod) string {
	if pod.Spec.ServiceAccountName == "" {
		return DefaultServiceAccount
	}
	return pod.Spec.ServiceAccountName
}

// Registration is the MeshEndpoint spec for pod on node: its annotations through the one parser,
// its identity and address, and the node's locality. A parse error is returned as is (a
// portspec.ErrorList); a pod without an IP yields ErrNoAddress.
func Registration(pod *corev1.Pod, node *corev1.Node) (meshv1alpha1.MeshEndpointSpec, error) {
	spec, err := portspec.Parse(pod.Annotations)
	if err != nil {
		return meshv1alpha1.MeshEndpointSpec{}, err
	}
	if pod.Status.PodIP == "" {
		return meshv1alpha1.MeshEndpointSpec{}, ErrNoAddress
	}
	out := meshv1alpha1.MeshEndpointSpec{
		ServiceName: ServiceAccount(pod),
		PodName:     pod.Name,
		PodUID:      string(pod.UID),
		NodeName:    pod.Spec.NodeName,
		Address:     pod.Status.PodIP,
		PrimaryPort: spec.Primary,
		Ports:       spec.Ports, // the parser writes the API's type, in its (sorted) order
		Weight:      spec.Weight,
		HealthCheck: meshv1alpha1.HealthCheck{Mode: meshv1alpha1.HealthCheckMode(spec.HealthCheck.Mode), Path: spec.HealthCheck.Path},
		Metadata:    spec.Metadata,
	}
	out.PortsSummary = meshv1alpha1.FormatPorts(out.Ports)
	if node != nil {
		out.Locality = Locality(node)
	}
	return out, nil
}

// Locality is node's region and zone, from its topology labels: every endpoint's on the node, and
// the node's own, which orders its proxy's endpoint priorities.
func Locality(node *corev1.Node) meshv1alpha1.Locality {
	return meshv1alpha1.Locality{Region: node.Labels[LabelRegion], Zone: node.Labels[LabelZone]}
}

// DefaultServiceAccountError is the one explanation, given by the pod webhook (as its denial)
// and by the node agent (as its refusal, when the webhook was down), of why a managed pod running
// as the namespace's `default` ServiceAccount is not meshed: its service would be named
// `default`, shared by every workload that forgot to name its own. Pod is "<namespace>/<name>",
// or the namespace alone for a pod whose name the API server has not generated yet.
type DefaultServiceAccountError struct {
	Pod string
	// Named is true when the pod names `default` itself (spec.serviceAccountName), false when it
	// names none and gets it by default.
	Named bool
}

func (e *DefaultServiceAccountError) Error() string {
	how := `names no ServiceAccount, so it runs as "default"`
	if e.Named {
		how = `runs as ServiceAccount "default"`
	}
	return fmt.Sprintf("pod %s is managed (label %s=%q) but %s, and a meshed pod's ServiceAccount is its service's name: "+
		`it would join a service called "default" with every other workload that names none. Create a ServiceAccount named after `+
		"the service (kubectl create serviceaccount <service>) and set spec.serviceAccountName: <service> in the pod template, "+
		"or remove the label %s", e.Pod, LabelManaged, ManagedValue, how, LabelManaged)
}

// Problems is every reason, of those a managed pod's ServiceAccount and annotations show, the
// mesh does not take it, at once: its ServiceAccount (CheckServiceAccount) and its annotations'
// errors (portspec.Parse's, bounded), one per line, each with its fix, so a user fixes all of
// them in one round; nil for none. spec is the parsed annotations when they parse. The pod
// webhook denies with it (beside its checks of the pod's volumes), the node agent refuses with it
// when the webhook was down, and kubectl aether check reports it. errors.As finds a
// *DefaultServiceAccountError and a portspec.ErrorList in it.
func Problems(pod *corev1.Pod) (spec portspec.Spec, err error) {
	account := CheckServiceAccount(pod)
	spec, parsed := portspec.Parse(pod.Annotations)
	return spec, errors.Join(account, parsed)
}

// CheckServiceAccount returns a *DefaultServiceAccountError when pod runs as the `default`
// ServiceAccount (named or unset), else nil. Whether the pod is managed is the caller's to know.
func CheckServiceAccount(pod *corev1.Pod) error {
	if ServiceAccount(pod) != DefaultServiceAccount {
		return nil
	}
	name := pod.Namespace + "/" + pod.Name
	if pod.Name == "" {
		name = "in namespace " + pod.Namespace
		if pod.GenerateName != "" {
			name = pod.Namespace + "/" + pod.GenerateName + "*"
		}
	}
	return &DefaultServiceAccountError{Pod: name, Named: pod.Spec.ServiceAccountName != ""}
}
