// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package conditions

import (
	"strconv"
	"unicode/utf8"
)

// Limits of the API fields the mesh writes free text into. A write over a limit is refused by
// the API server as a whole, so every message is cut to fit before it is written.
const (
	// MaxConditionMessage is metav1.Condition's message limit (32 KiB).
	MaxConditionMessage = 32768
	// MaxEventNote is the limit of an Event's note (events.k8s.io/v1) and message (core/v1).
	MaxEventNote = 1024
)

// Truncate returns s when it holds at most limit bytes, else its longest prefix (cut on a rune
// boundary) followed by "… (N bytes cut)" such that the whole fits in limit bytes.
func Truncate(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	// The marker's own length depends on N; size it for the largest N possible (len(s)).
	marker := len("… ( bytes cut)") + len(strconv.Itoa(len(s)))
	keep := max(limit-marker, 0)
	for keep > 0 && !utf8.RuneStart(s[keep]) {
		keep--
	}
	return s[:keep] + "… (" + strconv.Itoa(len(s)-keep) + " bytes cut)"
}
