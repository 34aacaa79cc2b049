// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/aether-mesh/aether-operator/internal/registration"
)

// LabelManaged opts a pod into the mesh. The rule lives in internal/registration, which the
// controller's verification shares.
const LabelManaged = registration.LabelManaged

// Topology labels a node's locality is read from.
const (
	LabelRegion = registration.LabelRegion
	LabelZone   = registration.LabelZone
)

// Managed reports whether pod opted into the mesh.
func Managed(pod *corev1.Pod) bool { return registration.Managed(pod) }
