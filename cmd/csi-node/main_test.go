// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestBadUsageNamesTheFlag: each bad command line exits 2, before serving anything, with a line
// naming the flag and what it wants.
func TestBadUsageNamesTheFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		says string
	}{
		{nil, "--node-name is empty"},
		{[]string{"--node-name=a", "--tmpfs-size=lots"}, `--tmpfs-size="lots": want a quantity of at least 4Ki`},
		{[]string{"--node-name=a", "--tmpfs-size=1"}, `--tmpfs-size="1": want a quantity of at least 4Ki`},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), tc.args, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), tc.says) {
			t.Errorf("run(%q) = %d, stderr %q; want 2, saying %q", tc.args, code, stderr.String(), tc.says)
		}
	}
}
