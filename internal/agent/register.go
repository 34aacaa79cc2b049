// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"errors"

	corev1 "k8s.io/api/core/v1"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/portspec"
)

// LabelManaged opts a pod into the mesh.
const LabelManaged = "aether.io/managed"

// Topology labels a node's locality is read from.
const (
	LabelRegion = "topology.kubernetes.io/region"
	LabelZone   = "topology.kubernetes.io/zone"
)

// ErrNoAddress means the pod has no IP yet; it is registered once it has one.
var ErrNoAddress = errors.New("the pod has no IP address yet")

// Managed reports whether pod opted into the mesh.
func Managed(pod *corev1.Pod) bool { return pod.Labels[LabelManaged] == "true" }

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
	serviceAccount := pod.Spec.ServiceAccountName
	if serviceAccount == "" {
		serviceAccount = "default"
	}
	out := meshv1alpha1.MeshEndpointSpec{
		ServiceName: serviceAccount,
		PodName:     pod.Name,
		PodUID:      string(pod.UID),
		NodeName:    pod.Spec.NodeName,
		Address:     pod.Status.PodIP,
		PrimaryPort: spec.Primary,
		Weight:      spec.Weight,
		HealthCheck: meshv1alpha1.HealthCheck{Mode: meshv1alpha1.HealthCheckMode(spec.HealthCheck.Mode), Path: spec.HealthCheck.Path},
		Metadata:    spec.Metadata,
	}
	for _, p := range spec.Ports {
		out.Ports = append(out.Ports, meshv1alpha1.PortProtocol{Port: p.Number, Protocol: meshv1alpha1.Protocol(p.Protocol), AppProtocol: meshv1alpha1.AppProtocol(p.AppProtocol)})
	}
	out.PortsSummary = meshv1alpha1.FormatPorts(out.Ports)
	if node != nil {
		out.Locality = meshv1alpha1.Locality{Region: node.Labels[LabelRegion], Zone: node.Labels[LabelZone]}
	}
	return out, nil
}
