// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package testapp

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aether-mesh/aether-operator/internal/spiretest"
)

// TestFetchSVID fetches this process's SVID from a real SPIRE agent's Workload API (spiretest:
// an entry for this process's uid, the unix attestor): it is the entry's ID, verified against
// the agent's bundle. Negative control: a socket where no agent listens gives an error naming
// it once the context ends, after logging each failed attempt.
func TestFetchSVID(t *testing.T) {
	env := spiretest.Start(t, spiretest.Options{TrustDomain: "aether.internal"})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var log bytes.Buffer
	id, err := FetchSVID(ctx, env.WorkloadSocket, 200*time.Millisecond, &log)
	if err != nil {
		t.Fatalf("FetchSVID: %v\n%s", err, log.String())
	}
	if id != env.Delegate {
		t.Fatalf("FetchSVID = %s, want %s (this process's entry)", id, env.Delegate)
	}

	missing := filepath.Join(t.TempDir(), "none.sock")
	short, cancelShort := context.WithTimeout(context.Background(), time.Second)
	defer cancelShort()
	log.Reset()
	if id, err := FetchSVID(short, missing, 100*time.Millisecond, &log); err == nil {
		t.Fatalf("FetchSVID on %s = %s, want an error (nothing listens there)", missing, id)
	} else if !strings.Contains(err.Error(), missing) {
		t.Fatalf("the error does not name the socket %s: %v", missing, err)
	}
	if attempts := strings.Count(log.String(), "error "); attempts < 2 {
		t.Fatalf("FetchSVID logged %d failed attempts in a second of 100 ms retries, want several:\n%s", attempts, log.String())
	}
}
