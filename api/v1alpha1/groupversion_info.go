// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Package v1alpha1 holds the mesh.aether.io/v1alpha1 API: MeshEndpoint (one per pod, written by
// the node agent) and MeshService (one per ServiceAccount, derived by the controller).
//
// It imports nothing from internal/: the API is the contract, the internal packages implement it.
// +kubebuilder:object:generate=true
// +groupName=mesh.aether.io
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of every type in this package.
	GroupVersion = schema.GroupVersion{Group: "mesh.aether.io", Version: "v1alpha1"}

	// SchemeBuilder registers this package's types with a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds this package's types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &MeshEndpoint{}, &MeshEndpointList{}, &MeshService{}, &MeshServiceList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
