// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestParseCaptureNever: --capture-never's CIDRs and bare addresses; a bad entry is refused naming
// the flag and the entry.
func TestParseCaptureNever(t *testing.T) {
	got, err := parseCaptureNever(" 10.0.0.0/8, fd00:ec2::254,,192.0.2.7 ")
	want := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00:ec2::254/128"), netip.MustParsePrefix("192.0.2.7/32")}
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("parseCaptureNever = %v, %v; want %v", got, err, want)
	}
	for entry, wantErr := range map[string]string{
		"10.0.0.1/8": `--capture-never: "10.0.0.1/8" has host bits set; did you mean 10.0.0.0/8?`,
		"metadata":   `--capture-never: "metadata" is neither a CIDR nor an address`,
	} {
		if _, err := parseCaptureNever(entry); err == nil || !strings.HasPrefix(err.Error(), wantErr) {
			t.Errorf("parseCaptureNever(%q) = %v, want an error starting %q", entry, err, wantErr)
		}
	}
}

// TestCaptureOptions: the capture flags read together; each bad one refused naming it.
func TestCaptureOptions(t *testing.T) {
	opts, err := captureOptions(time.Second, 1337, "203.0.113.0/24")
	if err != nil || *opts.ProxyUID != 1337 || !slices.Equal(opts.Never, []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24")}) {
		t.Errorf("captureOptions = %+v, %v; want uid 1337 and the CIDR alone (the node's addresses are the agent's to follow)", opts, err)
	}
	for _, tc := range []struct {
		resync time.Duration
		uid    int64
		never  string
		want   string
	}{
		{0, -1, "", "--capture-resync is 0s"},
		{time.Second, -2, "", "--capture-exclude-uid is -2"},
		{time.Second, -1, "10.0.0.1/8", "--capture-never"},
	} {
		if _, err := captureOptions(tc.resync, tc.uid, tc.never); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("captureOptions(%s, %d, %q) = %v, want an error starting %q", tc.resync, tc.uid, tc.never, err, tc.want)
		}
	}
}
