// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AccessPolicySpec says which mesh identities may call ports of one Service, or, without a
// target, of every Service of the policy's namespace.
//
// The semantics, in full: a port no policy governs is open to every mesh identity. Once any
// policy governs a port (it targets the port's Service and lists the port or no port, or it has
// no target and so governs every port of its namespace), a call reaches the port only when a
// rule of some policy governing the port admits it. A rule admits a call when the caller is one
// of its sources and, on an HTTP-class port, the request's method and path match it. A call no
// rule admits is answered 403 with x-aether-error: access-denied (HTTP-class ports) or closed
// before any byte reaches the application (TCP ports). A policy with no rules admits nothing:
// without a target it is the namespace's default of deny unless allowed.
type AccessPolicySpec struct {
	// TargetRef is the Service whose ports the policy governs. Omitted, the policy governs every
	// port of every Service in its namespace.
	// +optional
	TargetRef *TargetRef `json:"targetRef,omitempty"`
	// Ports are the target's ports the policy governs; empty, all of its ports. Only with a
	// targetRef.
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:Minimum=1
	// +kubebuilder:validation:items:Maximum=65535
	// +listType=set
	// +optional
	Ports []int32 `json:"ports,omitempty"`
	// Rules are what the policy admits: a call is admitted when any rule admits it. Empty, the
	// policy admits nothing and only closes the ports it governs.
	// +kubebuilder:validation:MaxItems=32
	// +listType=atomic
	// +optional
	Rules []AccessRule `json:"rules,omitempty"`
}

// AccessRule admits the calls of its sources, on an HTTP-class port only those with one of its
// methods and paths.
type AccessRule struct {
	// From are the callers the rule admits.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +listType=atomic
	From []AccessSource `json:"from"`
	// Methods are the HTTP methods the rule admits (upper case, e.g. GET); empty, any. A rule
	// with methods or paths admits nothing on a TCP port, where the mesh sees no request.
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=32
	// +listType=set
	// +optional
	Methods []string `json:"methods,omitempty"`
	// PathPrefixes are the request paths the rule admits, each by whole segments: "/api" admits
	// /api and /api/orders, not /apis. Each starts with "/"; empty, any path.
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=1024
	// +listType=set
	// +optional
	PathPrefixes []string `json:"pathPrefixes,omitempty"`
}

// AccessSource is one caller or a set of them: exactly one of serviceAccount and namespace.
// +kubebuilder:validation:XValidation:rule="has(self.serviceAccount) != has(self.__namespace__)",message="set exactly one of serviceAccount and namespace"
type AccessSource struct {
	// ServiceAccount admits the mesh identity of one ServiceAccount: the pods that run as it.
	// +optional
	ServiceAccount *ServiceAccountRef `json:"serviceAccount,omitempty"`
	// Namespace admits every mesh identity of the namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Namespace string `json:"namespace,omitempty"`
}

// ServiceAccountRef names a ServiceAccount.
type ServiceAccountRef struct {
	// Namespace is the ServiceAccount's namespace; omitted, the policy's own.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// Name is the ServiceAccount's name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// AccessPolicyStatus is what the controller made of the policy.
type AccessPolicyStatus struct {
	// Conditions: Accepted, ResolvedRefs.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// The conditions of an AccessPolicy, and their reasons. A policy is enforced as written whatever
// its conditions say (admission has checked its form): a condition that is False says which part
// of it has no effect now, never that it is off, so that a mistake closes more, not less.
const (
	// AccessConditionAccepted is True when every part of the policy takes effect.
	AccessConditionAccepted = "Accepted"
	// AccessConditionResolvedRefs is True when every ServiceAccount the policy admits is one some
	// meshed pod runs as.
	AccessConditionResolvedRefs = "ResolvedRefs"

	// AccessReasonAccepted (Accepted True): every part takes effect.
	AccessReasonAccepted = "Accepted"
	// AccessReasonTargetNotFound (Accepted False): no MeshService of the target's name (yet).
	AccessReasonTargetNotFound = "TargetNotFound"
	// AccessReasonPortNotDeclared (Accepted False): a port of spec.ports the target does not
	// declare; the message names it and the ports it does.
	AccessReasonPortNotDeclared = "PortNotDeclared"
	// AccessReasonHTTPRuleOnTCPPort (Accepted False): a rule with methods or paths governs a TCP
	// port, where it admits nothing; the message names the rule and the port.
	AccessReasonHTTPRuleOnTCPPort = "HTTPRuleOnTCPPort"
	// AccessReasonResolved (ResolvedRefs True): every ServiceAccount admitted runs a meshed pod.
	AccessReasonResolved = "ResolvedRefs"
	// AccessReasonUnknownIdentity (ResolvedRefs False): a ServiceAccount admitted that no meshed
	// pod runs as; the message names it. Harmless, and often a typo.
	AccessReasonUnknownIdentity = "UnknownIdentity"
)

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=apol
// +kubebuilder:printcolumn:name="Target",type=string,JSONPath=`.spec.targetRef.name`
// +kubebuilder:printcolumn:name="Ports",type=string,JSONPath=`.spec.ports`
// +kubebuilder:printcolumn:name="Accepted",type=string,JSONPath=`.status.conditions[?(@.type=="Accepted")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// AccessPolicy says which mesh identities may call a Service's ports.
type AccessPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   AccessPolicySpec   `json:"spec"`
	Status AccessPolicyStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// AccessPolicyList is a list of AccessPolicy.
type AccessPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []AccessPolicy `json:"items"`
}
