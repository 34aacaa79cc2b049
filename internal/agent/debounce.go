// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import "time"

// How the xDS rebuilds are debounced: a burst of changes (a rollout, a node's pods starting) is
// one rebuild once it has been quiet for rebuildQuiet, and never later than rebuildMax after its
// first change, so a steady trickle of changes still reaches Envoy every second.
const (
	rebuildQuiet = 100 * time.Millisecond
	rebuildMax   = time.Second
)

// debouncer tells when a burst of changes is due. It is pure: the caller says what time it is.
type debouncer struct {
	quiet, max time.Duration
	// first and last are the pending burst's first and latest changes; first is zero when
	// nothing is pending.
	first, last time.Time
}

// add records a change at now.
func (d *debouncer) add(now time.Time) {
	if d.first.IsZero() {
		d.first = now
	}
	d.last = now
}

// wait is how long after now the pending burst is due (0: due now); pending is false when no
// change is pending.
func (d *debouncer) wait(now time.Time) (wait time.Duration, pending bool) {
	if d.first.IsZero() {
		return 0, false
	}
	due := d.last.Add(d.quiet)
	if capped := d.first.Add(d.max); capped.Before(due) {
		due = capped
	}
	return max(due.Sub(now), 0), true
}

// take ends the pending burst: the rebuild that covers it starts now.
func (d *debouncer) take() { d.first, d.last = time.Time{}, time.Time{} }
