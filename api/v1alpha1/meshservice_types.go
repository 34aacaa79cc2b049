// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MeshServiceSpec is empty: a MeshService is derived entirely from its MeshEndpoints. It exists
// so that later, user-set service policy has a home that the controller never writes.
type MeshServiceSpec struct{}

// ServicePort is one port of a service: the union over its endpoints.
type ServicePort struct {
	// port is the application port.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +required
	Port int32 `json:"port"`

	// protocol is the port's protocol. While endpoints disagree (a rollout that retypes the
	// port), it is the protocol with the most ready endpoints, ties to the newer declaration.
	// +required
	Protocol Protocol `json:"protocol"`

	// endpoints is how many endpoints declare this port with this protocol.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Endpoints int32 `json:"endpoints"`

	// conditions of this port: Ready, ProtocolConsistent.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// accessPolicies are the AccessPolicies (config.aether.io) that govern this port, each as
	// <namespace>/<name>, sorted: a call reaches the port only when a rule of one of them admits
	// it. Empty, no policy governs the port and it is open to every mesh identity. At most 32,
	// the first by name, should more govern it.
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=317
	// +listType=set
	// +optional
	AccessPolicies []string `json:"accessPolicies,omitempty"`
}

// DialOutcome is what a client dialling one address spelling gets.
// +kubebuilder:validation:Enum=Reaches;Misdirected;Refused;HostDecides
type DialOutcome string

const (
	// DialReaches means the spelling reaches a port of the service.
	DialReaches DialOutcome = "Reaches"
	// DialMisdirected means an HTTP request the mesh answers itself with HTTP 421 (Misdirected
	// Request) and the header x-aether-error: the row's error (no-http-port, port-not-declared or
	// port-not-http); the row's reason, like the answer's body, names the HTTP spellings that work.
	DialMisdirected DialOutcome = "Misdirected"
	// DialRefused means nothing claims the spelling; the client sees ECONNREFUSED.
	DialRefused DialOutcome = "Refused"
	// DialHostDecides means the mesh's HTTP proxy port (<name>:18081): by itself it reaches no
	// port of the service; each request reaches what the port in its Host header decides, as the
	// surface's "Host: <name>…" rows say.
	DialHostDecides DialOutcome = "HostDecides"
)

// DialError is the value of the x-aether-error header the mesh sends with a 421 answer: why the
// request was misdirected. (The mesh's 400 answer to a malformed authority, bad-authority, is no
// row of a dial surface.)
// +kubebuilder:validation:Enum=no-http-port;port-not-declared;port-not-http
type DialError string

const (
	// DialErrorNoHTTPPort answers a request with no port in its authority, to a service that
	// serves no HTTP.
	DialErrorNoHTTPPort DialError = "no-http-port"
	// DialErrorPortNotDeclared answers a request for a port the service does not declare (18081
	// and 18082 included), and one with no port in its authority when port 80 is not declared
	// HTTP-class but the service serves HTTP on other ports.
	DialErrorPortNotDeclared DialError = "port-not-declared"
	// DialErrorPortNotHTTP answers a request whose authority names a port declared TCP or UDP.
	DialErrorPortNotHTTP DialError = "port-not-http"
)

// Dial is one row of a service's dial surface: an address spelling and what it reaches.
// +kubebuilder:validation:XValidation:rule="has(self.error) == (self.outcome == 'Misdirected')",message="error is the x-aether-error value of a Misdirected row: set on those rows and only on those"
type Dial struct {
	// address is the spelling a client dials, written for any of status.names as <name>:
	// "http://<name>/" (an HTTP request with no port in its authority), "<name>:18081" (the
	// mesh's HTTP proxy port), "Host: <name>:8080" (an HTTP request with that Host header;
	// "Host: <name>" has no port, "Host: <name>:*" any other port), "https://<name>/",
	// "<name>:18082", "<name>:9000" (a connection to that port), "<name>:18082/udp" (UDP
	// datagrams to the mesh's port, which reach a UDP primary), "<name>:5353/udp" (datagrams to
	// a port declared UDP), "<name>:*" (any other port, in either transport).
	// +kubebuilder:validation:MaxLength=64
	// +required
	Address string `json:"address"`

	// port is the application port reached; absent when the spelling reaches none.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	Port *int32 `json:"port,omitempty"`

	// protocol is the protocol of the spelling: HTTP for every HTTP request (http://, :18081, a
	// Host header), TCP for https:// and :18082, UDP for :18082/udp, the declared protocol for
	// :<port> and :<port>/udp. It never depends on the service.
	// +optional
	Protocol Protocol `json:"protocol,omitempty"`

	// outcome is Reaches, Misdirected (HTTP 421), Refused or HostDecides (the Host rows decide).
	// +required
	Outcome DialOutcome `json:"outcome"`

	// error is the x-aether-error header of a Misdirected row's 421 answer; absent otherwise.
	// +optional
	Error DialError `json:"error,omitempty"`

	// reason says why, in words a user can act on, with <name> standing for the name dialled. The
	// reason of a Misdirected row names its x-aether-error value and the HTTP spellings that work.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Reason string `json:"reason,omitempty"`
}

// EndpointCounts counts a service's endpoints.
type EndpointCounts struct {
	// ready is how many endpoints are Healthy.
	// +kubebuilder:validation:Minimum=0
	Ready int32 `json:"ready"`
	// total is how many endpoints exist, whatever their health.
	// +kubebuilder:validation:Minimum=0
	Total int32 `json:"total"`
}

// MeshService condition types and reasons.
const (
	// ServiceConditionReady is True when at least one endpoint is ready.
	ServiceConditionReady = "Ready"
	// ServiceConditionPortsConsistent is False while endpoints disagree on a port's protocol.
	ServiceConditionPortsConsistent = "PortsConsistent"
	// ServiceConditionServiceReady is True when the generated Service matches the dial surface.
	ServiceConditionServiceReady = "ServiceReady"
	// ServiceConditionPortsComplete is False (TooManyPorts) when the endpoints declare more than
	// MaxServicePorts distinct ports and some are left out of the status.
	ServiceConditionPortsComplete = "PortsComplete"
	// ServiceConditionReconciling is True while the service is settling on its own: endpoints
	// not ready yet (NoReadyEndpoints, NoEndpoints) or a rollout retyping a port
	// (ProtocolConflict). It is the kstatus convention that GitOps tools read (Flux, kstatus-based
	// waits: InProgress; the Argo CD health check in config/argocd: Progressing); its reason and
	// message are those of the condition that is pending.
	ServiceConditionReconciling = "Reconciling"
	// ServiceConditionStalled is True when the service cannot settle until a user acts: a Service
	// of its name that is not the mesh's and cannot be adopted (NameConflict), a refused Service write
	// (ServiceWriteFailed), a refused status (StatusInvalid) or too many ports (TooManyPorts).
	// kstatus reads it as Failed, the Argo CD health check as Degraded; its reason and message
	// are those of the blocking condition. Stalled wins over Reconciling: at most one is True.
	ServiceConditionStalled = "Stalled"

	// ServiceReasonSettled (on Reconciling=False) means nothing is pending: some endpoint is
	// ready and the endpoints agree on every port's protocol.
	ServiceReasonSettled = "Settled"
	// ServiceReasonNothingBlocks (on Stalled=False) means no condition waits on a user's action.
	ServiceReasonNothingBlocks = "NothingBlocks"
	// ServiceReasonEndpointsReady means at least one endpoint is Healthy.
	ServiceReasonEndpointsReady = "EndpointsReady"
	// ServiceReasonNoReadyEndpoints means endpoints exist but none is Healthy.
	ServiceReasonNoReadyEndpoints = "NoReadyEndpoints"
	// ServiceReasonNoEndpoints means the last endpoint went away; the ports it declared are kept so
	// the VIP and route status do not flap while the service scales to zero and back.
	ServiceReasonNoEndpoints = "NoEndpoints"
	// ServiceReasonPortsAgree means every endpoint declares each port with the same protocol.
	ServiceReasonPortsAgree = "PortsAgree"
	// ServiceReasonProtocolConflict means endpoints disagree on a port's protocol; the message names
	// each such port and how many endpoints declare each protocol.
	ServiceReasonProtocolConflict = "ProtocolConflict"
	// ServiceReasonServiceApplied means the generated Service carries the dial surface.
	ServiceReasonServiceApplied = "ServiceApplied"
	// ServiceReasonNameConflict means a Service of this name exists that the controller does not own
	// and cannot adopt (ServiceReasonExistingService); the message says why and how to fix it. It is
	// never modified.
	ServiceReasonNameConflict = "NameConflict"
	// ServiceReasonExistingService means a Service of this name that the controller does not own
	// selects exactly this service's pods (a ClusterIP Service made before the workload joined the
	// mesh): its cluster IP is the VIP, and it is never modified (ServiceReady=True).
	ServiceReasonExistingService = "ExistingService"
	// ServiceReasonExistingServiceDeleted is the reason of the Event emitted when the Service the
	// mesh used read-only is deleted and the controller generates its own, with a new VIP.
	ServiceReasonExistingServiceDeleted = "ExistingServiceDeleted"
	// ServiceReasonAllPortsListed means every port the endpoints declare is in the status.
	ServiceReasonAllPortsListed = "AllPortsListed"
	// ServiceReasonTooManyPorts means the endpoints declare more than MaxServicePorts distinct
	// ports. The ports declared by the most endpoints are kept (the service's primary first, ties
	// to the lower number); the others are left out of status.ports, the dial surface, the
	// generated Service and route evaluation. The message says how many were declared, the cap,
	// and which were left out.
	ServiceReasonTooManyPorts = "TooManyPorts"
	// ServiceReasonStatusInvalid (on Ready=False) means the API server refused the status the
	// controller derived; the rest of the status is the last one written, and the message carries
	// the API server's words. It is a safety net: no admitted input should lead to it.
	ServiceReasonStatusInvalid = "StatusInvalid"
	// ServiceReasonServiceWriteFailed means the API server refused to create or update the
	// generated Service; the message carries its answer. The rest of the status is still written,
	// and the controller keeps retrying.
	ServiceReasonServiceWriteFailed = "ServiceWriteFailed"
	// ServiceReasonTCPRefusedNoIdentity is the reason of the Warning Event on a MeshService with a
	// TCP port in a mesh that runs without a workload-identity issuer (--identity-issuer=none):
	// raw TCP rides mTLS only, so every raw-TCP spelling of its dial surface is refused. The note
	// says why, the fix and the ports. It is emitted when the refused ports change, not on every
	// reconcile.
	ServiceReasonTCPRefusedNoIdentity = "TCPRefusedNoIdentity"

	// PortConditionReady is True when at least one ready endpoint serves the port in its
	// reported protocol.
	PortConditionReady = "Ready"
	// PortConditionProtocolConsistent is False (ProtocolConflict) while endpoints disagree on
	// this port's protocol.
	PortConditionProtocolConsistent = "ProtocolConsistent"
)

// MeshServiceStatus is everything the controller derives about one service.
type MeshServiceStatus struct {
	// ports are the sorted union of the endpoints' ports. Each endpoint declares at most 64
	// (MaxPorts); the union holds at most 256 (MaxServicePorts): beyond that the ports declared
	// by the fewest endpoints are left out and condition PortsComplete is False.
	// +listType=map
	// +listMapKey=port
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:XValidation:rule="self.map(p, p.port).isSorted()",message="ports must be sorted by port"
	// +optional
	Ports []ServicePort `json:"ports,omitempty"`

	// portsSummary spells ports for the PORTS column ("8080/HTTP,9000/TCP"); when they do not
	// fit it names the first and counts the rest ("8080/HTTP,9000/TCP,… +90 more").
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	PortsSummary string `json:"portsSummary,omitempty"`

	// primaryPort is the service's primary port: the one most of its endpoints declare as
	// endpoint.aether.io/port (ties to the newer declaration, then the lower port). It decides
	// the default TCP port when it is TCP.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	PrimaryPort int32 `json:"primaryPort,omitempty"`

	// defaultHTTPPort is what a portless http:// reaches (http://<name>/, Host: <name>): 80 when
	// declared HTTP-class, else absent, whatever else the service serves. The authority's port is
	// the port: http://<name>:8080/ reaches 8080.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	DefaultHTTPPort *int32 `json:"defaultHTTPPort,omitempty"`

	// defaultTCPPort is what <name>:18082 reaches; absent when the service has no TCP port.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	DefaultTCPPort *int32 `json:"defaultTCPPort,omitempty"`

	// names are the names that reach the service, each listed once and each resolving the same
	// way: the mesh name <service>.<namespace>.<mesh domain>, then the generated Service's
	// <service>.<namespace>.svc.cluster.local and <service>.<namespace> (of the generated Service,
	// or of a user's Service adopted read-only: ExistingService). Only the mesh name when a
	// Service of the service's name is not the mesh's and cannot be adopted (ServiceReady=False,
	// NameConflict).
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=3
	// +kubebuilder:validation:items:MaxLength=571
	// +optional
	Names []string `json:"names,omitempty"`

	// localName is the service's name without a namespace, <service> (Host: <service>:8080): it
	// reaches the service, by the same dial surface as names, from pods of the service's own
	// namespace only, as the cluster's DNS search makes it; from another namespace it names that
	// namespace's service of the name, if there is one. Absent when a Service of the service's
	// name is not the mesh's and cannot be adopted (ServiceReady=False, NameConflict).
	// +kubebuilder:validation:MaxLength=253
	// +optional
	LocalName string `json:"localName,omitempty"`

	// dialSurface lists every address spelling of the service once, written for any of its
	// names (and, from the service's own namespace, its localName) as <name>, and what it
	// reaches: http://<name>/, <name>:18081, the HTTP requests by Host header (no port, each
	// declared port, 18081, 18082, any other), https://<name>/, <name>:18082, <name>:18082/udp,
	// each declared port (<name>:<p>/udp for a UDP one) and any other port: 2 × ports + 10 rows,
	// at most 2 × 256 + 10 = 522.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=522
	// +optional
	DialSurface []Dial `json:"dialSurface,omitempty"`

	// vip is the cluster IP of the generated Service, or of a user's Service of the service's name
	// adopted read-only (ServiceReady=True, ExistingService).
	// +kubebuilder:validation:MaxLength=45
	// +optional
	VIP string `json:"vip,omitempty"`

	// identity is the service's SPIFFE ID: spiffe://<trust-domain>/ns/<namespace>/sa/<name>.
	// +kubebuilder:validation:MaxLength=2048
	// +optional
	Identity string `json:"identity,omitempty"`

	// endpoints counts ready and total endpoints.
	// +optional
	Endpoints EndpointCounts `json:"endpoints,omitzero"`

	// endpointsSummary spells endpoints for the ENDPOINTS column ("3/3": ready/total).
	// +kubebuilder:validation:MaxLength=32
	// +optional
	EndpointsSummary string `json:"endpointsSummary,omitempty"`

	// observedGeneration is the generation the status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions: Ready, PortsConsistent, ServiceReady, PortsComplete, and the summary that
	// GitOps tools read (kstatus): Reconciling, Stalled.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// MeshService is one service of the mesh: the ports its endpoints serve, the default HTTP and
// TCP port, what each address spelling reaches, and what is wrong. Name = ServiceAccount name;
// created and owned by the controller.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=meshsvc,categories=aether
// +kubebuilder:printcolumn:name="HTTP",type=integer,JSONPath=`.status.defaultHTTPPort`
// +kubebuilder:printcolumn:name="TCP",type=integer,JSONPath=`.status.defaultTCPPort`
// +kubebuilder:printcolumn:name="Ports",type=string,JSONPath=`.status.portsSummary`
// +kubebuilder:printcolumn:name="Endpoints",type=string,JSONPath=`.status.endpointsSummary`
// +kubebuilder:printcolumn:name="VIP",type=string,JSONPath=`.status.vip`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type MeshService struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec MeshServiceSpec `json:"spec,omitzero"`

	// +optional
	Status MeshServiceStatus `json:"status,omitzero"`
}

// MeshServiceList is a list of MeshServices.
// +kubebuilder:object:root=true
type MeshServiceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MeshService `json:"items"`
}
