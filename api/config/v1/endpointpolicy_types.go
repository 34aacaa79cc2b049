// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// KindService is the one kind a policy targets.
const KindService = "Service"

// TargetRef names the Service a policy applies to: in the policy's own namespace, of the core
// group.
type TargetRef struct {
	// Group is the target's API group: "" (the core group), the only one.
	// +kubebuilder:validation:Enum=""
	// +optional
	Group string `json:"group"`
	// Kind is the target's kind: Service, the only one.
	// +kubebuilder:validation:Enum=Service
	Kind string `json:"kind"`
	// Name is the Service's name, in the policy's namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// EndpointPolicySpec is how the pods of one Service are delivered to.
type EndpointPolicySpec struct {
	// TargetRef is the Service whose pods the policy applies to.
	TargetRef TargetRef `json:"targetRef"`
	// UDSSocket makes the node's proxy deliver the Service's pods' inbound requests to a Unix
	// socket: <volume>/<socket-file>, the name of the pod's csi.aether.io volume and a file
	// directly inside it, the file name at most 54 bytes. A pod's own
	// endpoint.aether.io/uds-socket annotation wins over it.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	UDSSocket string `json:"udsSocket"`
}

// EndpointPolicyStatus is what the controller made of the policy.
type EndpointPolicyStatus struct {
	// Conditions: Accepted.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// The conditions of an EndpointPolicy, and their reasons.
const (
	// PolicyConditionAccepted is True when the policy is the one that applies to its Service.
	PolicyConditionAccepted = "Accepted"

	// PolicyReasonAccepted (True) means the policy applies to its target's pods that do not
	// carry the annotation of their own.
	PolicyReasonAccepted = "Accepted"
	// PolicyReasonConflicted (False) means another policy targets the same Service and wins: of
	// the policies targeting one Service, the one with the lexicographically smallest name
	// applies; the message names it.
	PolicyReasonConflicted = "Conflicted"
	// PolicyReasonInvalid (False) means spec.udsSocket does not parse (a policy written while the
	// admission webhook was down); the message says why and how to fix it.
	PolicyReasonInvalid = "Invalid"
)

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=epol
// +kubebuilder:printcolumn:name="Target",type=string,JSONPath=`.spec.targetRef.name`
// +kubebuilder:printcolumn:name="Socket",type=string,JSONPath=`.spec.udsSocket`
// +kubebuilder:printcolumn:name="Accepted",type=string,JSONPath=`.status.conditions[?(@.type=="Accepted")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// EndpointPolicy declares, for the pods of one Service, how the node's proxy delivers their
// inbound requests.
type EndpointPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   EndpointPolicySpec   `json:"spec"`
	Status EndpointPolicyStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// EndpointPolicyList is a list of EndpointPolicy.
type EndpointPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EndpointPolicy `json:"items"`
}
