// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Package v1 holds the config.aether.io/v1 API: EndpointPolicy, how the node's proxy delivers a
// Service's inbound requests to its pods, declared once per Service by the platform's owner
// instead of on every pod.
//
// It imports nothing from internal/: the API is the contract, the internal packages implement it
// (the value of spec.udsSocket is judged by internal/portspec, at admission and by the agent).
// +kubebuilder:object:generate=true
// +groupName=config.aether.io
package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of every type in this package.
	GroupVersion = schema.GroupVersion{Group: "config.aether.io", Version: "v1"}

	// SchemeBuilder registers this package's types with a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds this package's types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &EndpointPolicy{}, &EndpointPolicyList{}, &AccessPolicy{}, &AccessPolicyList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
