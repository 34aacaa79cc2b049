// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package v1alpha1_test

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
)

// ports returns n distinct sorted ports from first on, of protocol p.
func ports(first int32, n int, p meshv1alpha1.Protocol) []meshv1alpha1.PortProtocol {
	out := make([]meshv1alpha1.PortProtocol, n)
	for i := range out {
		out[i] = meshv1alpha1.PortProtocol{Port: first + int32(i), Protocol: p}
	}
	return out
}

// checkSummary checks FormatPorts(in) fits MaxPortsSummary and is either the whole list or the
// longest prefix of it that fits followed by "… +N more" with N the ports it leaves out.
func checkSummary(t *testing.T, in []meshv1alpha1.PortProtocol) string {
	t.Helper()
	got := meshv1alpha1.FormatPorts(in)
	whole := make([]string, len(in))
	for i, p := range in {
		whole[i] = fmt.Sprintf("%d/%s", p.Port, p.Protocol)
	}
	if len(got) > meshv1alpha1.MaxPortsSummary || utf8.RuneCountInString(got) > meshv1alpha1.MaxPortsSummary {
		t.Fatalf("%d ports: summary of %d bytes exceeds %d", len(in), len(got), meshv1alpha1.MaxPortsSummary)
	}
	all := strings.Join(whole, ",")
	if len(all) <= meshv1alpha1.MaxPortsSummary {
		if got != all {
			t.Fatalf("%d ports fit (%d bytes) yet the summary is %q", len(in), len(all), got)
		}
		return got
	}
	head, count, ok := strings.Cut(got, "… +")
	n, err := strconv.Atoi(strings.TrimSuffix(count, " more"))
	if !ok || err != nil || !strings.HasSuffix(count, " more") {
		t.Fatalf("%d ports (%d bytes) do not fit, yet the summary has no \"… +N more\" tail: %q", len(in), len(all), got)
	}
	shown := strings.Split(strings.TrimSuffix(head, ","), ",")
	if head == "" {
		shown = nil
	}
	if len(shown)+n != len(in) || strings.Join(shown, ",") != strings.Join(whole[:len(shown)], ",") {
		t.Fatalf("%d ports: the summary shows %d and counts %d more: %q", len(in), len(shown), n, got)
	}
	// Maximal: one more port shown would not fit.
	longer := strings.Join(whole[:len(shown)+1], ",") + ",… +" + strconv.Itoa(n-1) + " more"
	if n > 1 && len(longer) <= meshv1alpha1.MaxPortsSummary {
		t.Fatalf("%d ports: the summary shows %d, yet %d fit: %q", len(in), len(shown), len(shown)+1, longer)
	}
	return got
}

// TestFormatPorts: the summary is the whole list while it fits in MaxPortsSummary, and degrades
// to the first ports that fit and a count of the rest beyond it.
func TestFormatPorts(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []meshv1alpha1.PortProtocol
		want string // "" checks only the properties
	}{
		{"none", nil, ""},
		{"three", []meshv1alpha1.PortProtocol{{Port: 8080, Protocol: "HTTP"}, {Port: 9000, Protocol: "TCP"}, {Port: 9090, Protocol: "HTTP2"}}, "8080/HTTP,9000/TCP,9090/HTTP2"},
		// "10000/HTTP2" is 11 bytes, 12 with its comma: 85 × 12 − 1 = 1019 fit, 86 do not.
		{"85 wide ports fit", ports(10000, 85, "HTTP2"), ""},
		{"86 wide ports do not", ports(10000, 86, "HTTP2"), ""},
		{"64 of one endpoint", ports(60000, meshv1alpha1.MaxPorts, "HTTP2"), ""},
		{"116 of 64+31+21 pods", ports(20000, 116, "HTTP"), ""},
		{"256 at the service cap", ports(30000, meshv1alpha1.MaxServicePorts, "TCP"), ""},
		{"320 of five pods", ports(40000, 320, "HTTP2"), ""},
		{"every port", ports(1, 65535, "TCP"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := checkSummary(t, tc.in)
			if tc.want != "" && got != tc.want {
				t.Errorf("FormatPorts = %q, want %q", got, tc.want)
			}
		})
	}
	t.Run("85 wide ports fit whole", func(t *testing.T) {
		if got := meshv1alpha1.FormatPorts(ports(10000, 85, "HTTP2")); strings.Contains(got, "more") || len(got) != 1019 {
			t.Errorf("85 ports: %d bytes %q", len(got), got)
		}
	})
	t.Run("86 wide ports end in a count", func(t *testing.T) {
		got := meshv1alpha1.FormatPorts(ports(10000, 86, "HTTP2"))
		if !strings.HasSuffix(got, ",10083/HTTP2,… +2 more") {
			t.Errorf("86 ports: %q, want the first 84 and \"… +2 more\"", got[max(len(got)-40, 0):])
		}
	})
	t.Run("random lengths and widths", func(t *testing.T) {
		rng := rand.New(rand.NewPCG(1024, 64))
		protocols := []meshv1alpha1.Protocol{"HTTP", "HTTP2", "TCP"}
		for range 500 {
			n := rng.IntN(400)
			in := make([]meshv1alpha1.PortProtocol, n)
			for i := range in {
				in[i] = meshv1alpha1.PortProtocol{Port: int32(1 + rng.IntN(65535)), Protocol: protocols[rng.IntN(3)]}
			}
			checkSummary(t, in)
		}
	})
}
