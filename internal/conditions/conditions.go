// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Package conditions is the one helper every writer of status conditions uses: translators
// produce conditions without timestamps, and Merge stamps them against what the object already
// has, moving lastTransitionTime only when a condition's status flips.
//
// It is pure: no API client, no controller-runtime (depguard rule pure), no clock of its own.
package conditions

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Merge returns desired, in desired's order, each stamped with observedGeneration and with the
// lastTransitionTime of the same-typed condition in existing when its status is unchanged, or
// now when it flipped or is new. Conditions of existing that desired lacks are dropped: the
// translator states every condition it owns.
func Merge(existing, desired []metav1.Condition, generation int64, now metav1.Time) []metav1.Condition {
	if desired == nil {
		return nil
	}
	out := make([]metav1.Condition, len(desired))
	for i, c := range desired {
		c.ObservedGeneration = generation
		c.LastTransitionTime = now
		if prev := find(existing, c.Type); prev != nil && prev.Status == c.Status {
			c.LastTransitionTime = prev.LastTransitionTime
		}
		out[i] = c
	}
	return out
}

// Flipped reports whether condition type t has a different status in after than in before
// (appearing counts as a flip; disappearing does not).
func Flipped(before, after []metav1.Condition, t string) bool {
	a := find(after, t)
	if a == nil {
		return false
	}
	b := find(before, t)
	return b == nil || b.Status != a.Status
}

// Find returns the condition of type t, or nil.
func Find(conditions []metav1.Condition, t string) *metav1.Condition { return find(conditions, t) }

func find(conditions []metav1.Condition, t string) *metav1.Condition {
	for i := range conditions {
		if conditions[i].Type == t {
			return &conditions[i]
		}
	}
	return nil
}
