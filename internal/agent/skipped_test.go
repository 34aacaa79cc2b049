// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// What a build leaves out is logged once when it appears, and the gauge says how much is left out
// now: a rebuild that leaves the same pod out says nothing new.
func TestReportSkippedLogsEachNoteOnce(t *testing.T) {
	var logged []string
	log := funcr.New(func(prefix, args string) { logged = append(logged, args) }, funcr.Options{})
	p := &publisher{log: log, node: "node-a", skipped: map[string]bool{}}

	p.reportSkipped([]string{"pod a: no netns", "service b: identity is empty"})
	p.reportSkipped([]string{"pod a: no netns", "service b: identity is empty"})
	if got := testutil.ToFloat64(xdsSkipped); got != 2 {
		t.Errorf("gauge %v, want 2", got)
	}
	if len(logged) != 2 {
		t.Fatalf("logged %d lines, want one per note, once: %q", len(logged), logged)
	}
	p.reportSkipped([]string{"service b: identity is empty", "pod c: port listed twice"})
	if got := testutil.ToFloat64(xdsSkipped); got != 2 {
		t.Errorf("gauge %v, want 2", got)
	}
	if len(logged) != 3 || !strings.Contains(logged[2], "pod c: port listed twice") {
		t.Errorf("logged %q, want the new note only", logged)
	}
	p.reportSkipped(nil)
	if got := testutil.ToFloat64(xdsSkipped); got != 0 {
		t.Errorf("gauge %v, want 0 when nothing is left out", got)
	}
}
