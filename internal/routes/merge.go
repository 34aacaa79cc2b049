// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package routes

import (
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/aether-mesh/aether-operator/internal/conditions"
)

// MergeParents returns the route's status.parents with this controller's entries replaced by
// ours: entries of other controllers (and of parents that are not ours) stay where they are,
// untouched; an entry of ours keeps its place and its conditions' lastTransitionTime unless
// their status flipped; new entries of ours are appended; entries of ours for parents the route
// no longer names are dropped.
func MergeParents(existing, ours []gwapiv1.RouteParentStatus, generation int64, now metav1.Time) []gwapiv1.RouteParentStatus {
	stamp := func(entry gwapiv1.RouteParentStatus, previous []metav1.Condition) gwapiv1.RouteParentStatus {
		entry.Conditions = conditions.Merge(previous, entry.Conditions, generation, now)
		return entry
	}
	used := make([]bool, len(ours))
	out := make([]gwapiv1.RouteParentStatus, 0, len(existing)+len(ours))
	for _, e := range existing {
		if e.ControllerName != ControllerName {
			out = append(out, e)
			continue
		}
		for i, o := range ours {
			if !used[i] && equality.Semantic.DeepEqual(o.ParentRef, e.ParentRef) {
				used[i] = true
				out = append(out, stamp(o, e.Conditions))
				break
			}
		}
	}
	for i, o := range ours {
		if !used[i] {
			out = append(out, stamp(o, nil))
		}
	}
	return out
}
