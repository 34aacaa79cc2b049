// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"testing"
	"time"
)

// TestDebouncer drives the debouncer with a fake clock (the times it is told): a lone change is
// due 100 ms later; each change in a burst pushes that back, but never past 1 s after the first;
// after take, nothing is pending until the next change.
func TestDebouncer(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	type step struct {
		at      int  // ms after t0
		change  bool // a change at this time, else only a look
		wait    time.Duration
		pending bool
	}
	for name, steps := range map[string][]step{
		"nothing pending": {{at: 0, pending: false}},
		"one change, quiet": {
			{at: 0, change: true, wait: 100 * time.Millisecond, pending: true},
			{at: 60, wait: 40 * time.Millisecond, pending: true},
			{at: 100, wait: 0, pending: true},
			{at: 250, wait: 0, pending: true}, // late: still due, never negative
		},
		"a burst moves the deadline": {
			{at: 0, change: true, wait: 100 * time.Millisecond, pending: true},
			{at: 80, change: true, wait: 100 * time.Millisecond, pending: true},
			{at: 150, change: true, wait: 100 * time.Millisecond, pending: true},
			{at: 200, wait: 50 * time.Millisecond, pending: true},
			{at: 250, wait: 0, pending: true},
		},
		"a steady trickle is capped at 1 s after the first change": {
			{at: 0, change: true, wait: 100 * time.Millisecond, pending: true},
			{at: 850, change: true, wait: 100 * time.Millisecond, pending: true},
			{at: 950, change: true, wait: 50 * time.Millisecond, pending: true},
			{at: 990, change: true, wait: 10 * time.Millisecond, pending: true},
			{at: 1000, change: true, wait: 0, pending: true},
		},
	} {
		d := debouncer{quiet: rebuildQuiet, max: rebuildMax}
		for _, s := range steps {
			if s.change {
				d.add(ms(s.at))
			}
			if wait, pending := d.wait(ms(s.at)); wait != s.wait || pending != s.pending {
				t.Errorf("%s: at %d ms: wait %v, pending %v; want %v, %v", name, s.at, wait, pending, s.wait, s.pending)
			}
		}
	}

	// take ends the burst: the next change starts a new one, with its own cap.
	d := debouncer{quiet: rebuildQuiet, max: rebuildMax}
	d.add(ms(0))
	d.add(ms(900))
	d.take()
	if _, pending := d.wait(ms(900)); pending {
		t.Error("pending after take")
	}
	d.add(ms(1500))
	if wait, _ := d.wait(ms(1500)); wait != 100*time.Millisecond {
		t.Errorf("a change after take is due in %v, want 100ms (a new burst, not the old one's cap)", wait)
	}
}
