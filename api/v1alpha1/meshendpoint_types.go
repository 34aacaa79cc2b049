// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MeshEndpointSpec is one pod's registration: who serves, where, and which ports in which
// protocol. The node agent of the pod's node writes it from the pod's annotations.
// +kubebuilder:validation:XValidation:rule="self.ports.exists(p, p.port == self.primaryPort)",message="primaryPort must be one of ports",fieldPath=".primaryPort"
type MeshEndpointSpec struct {
	// serviceName is the service this endpoint belongs to: the pod's ServiceAccount name.
	// It cannot change: a pod cannot move between services.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="serviceName is immutable: a pod's service is its ServiceAccount, which cannot change"
	// +required
	ServiceName string `json:"serviceName"`

	// podName is the name of the pod this endpoint registers (also this object's name).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	PodName string `json:"podName"`

	// podUID is the UID of that pod, so a recreated pod of the same name is a new endpoint.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +required
	PodUID string `json:"podUID"`

	// nodeName is the node the pod runs on; only that node's agent may write this object.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	NodeName string `json:"nodeName"`

	// address is the pod's IP address (IPv4 or IPv6).
	// +kubebuilder:validation:MaxLength=45
	// +kubebuilder:validation:XValidation:rule="isIP(self)",message="address must be an IPv4 or IPv6 address, for example 10.0.0.7"
	// +required
	Address string `json:"address"`

	// primaryPort is the pod's declared port (endpoint.aether.io/port): served and
	// health-checked.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +required
	PrimaryPort int32 `json:"primaryPort"`

	// ports are every port the pod serves, sorted by port, each once, the primary included.
	// +listType=map
	// +listMapKey=port
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:XValidation:rule="self.map(p, p.port).isSorted()",message="ports must be sorted by port"
	// +required
	Ports []PortProtocol `json:"ports"`

	// portsSummary spells ports for the PORTS column ("8080/HTTP,9000/TCP"): a printer column
	// shows one JSONPath value and cannot join a list. Display only; writers set it with
	// FormatPorts. (A CEL rule comparing it to ports exceeds the API server's cost budget.)
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	PortsSummary string `json:"portsSummary,omitempty"`

	// weight is the load-balancing weight, 1..65535.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +kubebuilder:default=1024
	// +optional
	Weight int32 `json:"weight,omitempty"`

	// healthCheck says how the endpoint's health is established.
	// +kubebuilder:default={}
	// +optional
	HealthCheck HealthCheck `json:"healthCheck,omitzero"`

	// metadata is free-form endpoint metadata (from metadata.endpoint.aether.io/<key>), used
	// for subset routing. Keys are DNS labels; ip, pod, cluster and namespace are reserved.
	// +kubebuilder:validation:MaxProperties=32
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.matches('^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$') && !(k in ['ip', 'pod', 'cluster', 'namespace']))",message="metadata keys must be DNS labels and not ip, pod, cluster or namespace"
	// +optional
	Metadata map[string]string `json:"metadata,omitempty"`

	// locality is the pod's node's topology.kubernetes.io/region and zone.
	// +optional
	Locality Locality `json:"locality,omitzero"`
}

// HealthCheckMode says who checks an endpoint's health.
// +kubebuilder:validation:Enum=eds;active
type HealthCheckMode string

const (
	// HealthCheckEDS means the node agent vets the endpoint and publishes its health (delegated liveness).
	HealthCheckEDS HealthCheckMode = "eds"
	// HealthCheckActive means the client proxies probe the endpoint too, through the mesh hop: when
	// any endpoint of a service asks, every client's clusters of the service probe all of its
	// endpoints, on top of the node agent's verdict.
	HealthCheckActive HealthCheckMode = "active"
)

// HealthCheck is how an endpoint's health is established.
type HealthCheck struct {
	// mode is eds (the node agent probes) or active (the client proxies probe too).
	// +kubebuilder:default=eds
	// +optional
	Mode HealthCheckMode `json:"mode,omitempty"`

	// path is the HTTP path probed on an HTTP primary port.
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:Pattern=`^/[!-~]*$`
	// +kubebuilder:default="/"
	// +optional
	Path string `json:"path,omitempty"`
}

// Locality is where an endpoint runs, from its node's topology labels.
type Locality struct {
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Region string `json:"region,omitempty"`
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Zone string `json:"zone,omitempty"`
}

// Health is an endpoint's health as the node agent sees it.
// +kubebuilder:validation:Enum=Pending;Healthy;Unhealthy;Draining
type Health string

const (
	// HealthPending means registered, not yet vetted. Not routable.
	HealthPending Health = "Pending"
	// HealthHealthy means the primary port answered its probe. Routable.
	HealthHealthy Health = "Healthy"
	// HealthUnhealthy means the primary port failed its probe. Not routable.
	HealthUnhealthy Health = "Unhealthy"
	// HealthDraining means the pod is being deleted; no new requests.
	HealthDraining Health = "Draining"
)

// MeshEndpoint condition types and reasons.
const (
	// EndpointConditionRegistered is False when the pod's current annotations do not parse; the
	// last valid registration stays in service and the message carries the parser's error.
	EndpointConditionRegistered = "Registered"

	// EndpointReasonRegistered means the spec matches the pod's annotations.
	EndpointReasonRegistered = "Registered"
	// EndpointReasonInvalidAnnotation means the pod's annotations were edited into an invalid state.
	EndpointReasonInvalidAnnotation = "InvalidAnnotation"
	// EndpointReasonDefaultServiceAccount means the pod runs as the `default` ServiceAccount,
	// which no meshed pod may (its service would be called "default").
	EndpointReasonDefaultServiceAccount = "DefaultServiceAccount"

	// EndpointConditionDraining is True from the moment the agent sees its pod's deletion
	// request (drain phase 1: health Draining, no new requests). Its lastTransitionTime is when.
	EndpointConditionDraining = "Draining"
	// EndpointConditionClosing is True from 1 s before the kubelet sends the pod SIGTERM (drain
	// phase 2: health Unhealthy, clients close their idle connections before the application
	// exits). Its lastTransitionTime is when.
	EndpointConditionClosing = "Closing"

	// EndpointReasonDeletionRequested is the reason of Draining=True.
	EndpointReasonDeletionRequested = "DeletionRequested"
	// EndpointReasonSigtermDue is the reason of Closing=True.
	EndpointReasonSigtermDue = "SigtermDue"

	// EndpointConditionVerified is the controller's verdict on whether the endpoint is a real
	// pod (DESIGN section 7, NodeRestriction's idea): a pod of that name, UID, node, IP and
	// ServiceAccount, whose annotations declare these ports. Only a Verified endpoint joins its
	// MeshService; False names the first mismatch as the reason and every mismatch in the message.
	EndpointConditionVerified = "Verified"

	// EndpointReasonPodMatches means a pod matches every field checked (Verified=True).
	EndpointReasonPodMatches = "PodMatches"
	// EndpointReasonPodNameMismatch means spec.podName is not the MeshEndpoint's name (an endpoint
	// is named after its pod, so one pod cannot be counted twice).
	EndpointReasonPodNameMismatch = "PodNameMismatch"
	// EndpointReasonPodNotFound means no managed pod (label aether.io/managed=true) of that name
	// exists in the namespace.
	EndpointReasonPodNotFound = "PodNotFound"
	// EndpointReasonPodUIDMismatch means the pod of that name has another UID.
	EndpointReasonPodUIDMismatch = "PodUIDMismatch"
	// EndpointReasonNodeMismatch means the pod is not bound to spec.nodeName.
	EndpointReasonNodeMismatch = "NodeMismatch"
	// EndpointReasonAddressMismatch means spec.address is not among the pod's IPs.
	EndpointReasonAddressMismatch = "AddressMismatch"
	// EndpointReasonServiceAccountMismatch means spec.serviceName is not the pod's ServiceAccount.
	EndpointReasonServiceAccountMismatch = "ServiceAccountMismatch"
	// EndpointReasonPortsMismatch means spec.ports or spec.primaryPort differ from what the pod's
	// annotations declare (checked only while they parse: otherwise the agent keeps the last
	// valid registration in service, Registered=False).
	EndpointReasonPortsMismatch = "PortsMismatch"
	// EndpointReasonNamespaceIgnored means the MeshEndpoint is in a namespace the mesh never takes
	// (the manager's --ignored-namespaces: Kubernetes' own and the operator's).
	EndpointReasonNamespaceIgnored = "NamespaceIgnored"

	// EndpointReasonNameSquatted is the reason of the Warning Event on a pod whose name a
	// MeshEndpoint of another node held: the controller deleted that endpoint, so that the agent
	// of the pod's own node can register the pod under its name.
	EndpointReasonNameSquatted = "NameSquatted"
)

// MeshEndpointStatus is what the node agent observes of the endpoint.
type MeshEndpointStatus struct {
	// health is Pending until the agent's first probe settles it.
	// +optional
	Health Health `json:"health,omitempty"`

	// observedGeneration is the spec generation the status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions: Registered (written by the node agent) and Verified (written by the
	// controller). Each writer changes only its own type.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// MeshEndpoint is one pod's membership in a mesh service: its address, its ports and their
// protocols, and its health. Name = pod name; owner = the pod.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=meshep,categories=aether
// +kubebuilder:selectablefield:JSONPath=`.spec.nodeName`
// +kubebuilder:selectablefield:JSONPath=`.spec.serviceName`
// +kubebuilder:printcolumn:name="Service",type=string,JSONPath=`.spec.serviceName`
// +kubebuilder:printcolumn:name="Address",type=string,JSONPath=`.spec.address`
// +kubebuilder:printcolumn:name="Ports",type=string,JSONPath=`.spec.portsSummary`
// +kubebuilder:printcolumn:name="Health",type=string,JSONPath=`.status.health`
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.spec.nodeName`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type MeshEndpoint struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec MeshEndpointSpec `json:"spec"`

	// +optional
	Status MeshEndpointStatus `json:"status,omitzero"`
}

// MeshEndpointList is a list of MeshEndpoints.
// +kubebuilder:object:root=true
type MeshEndpointList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MeshEndpoint `json:"items"`
}
