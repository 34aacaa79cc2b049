// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package conditions

import (
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Set returns existing with c in place of the condition of its type (appended when there is
// none), stamped as Merge stamps it; every other condition is kept as it is. It is for objects
// whose conditions have several writers, each owning its own types: a MeshEndpoint's Registered
// is the node agent's, its Verified the controller's. Merge, which drops the types it is not
// given, would erase the other writer's.
func Set(existing []metav1.Condition, c metav1.Condition, generation int64, now metav1.Time) []metav1.Condition {
	stamped := Merge(existing, []metav1.Condition{c}, generation, now)[0]
	out := slices.Clone(existing)
	if i := slices.IndexFunc(out, func(e metav1.Condition) bool { return e.Type == c.Type }); i >= 0 {
		out[i] = stamped
		return out
	}
	return append(out, stamped)
}
