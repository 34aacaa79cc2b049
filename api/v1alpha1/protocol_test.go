// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package v1alpha1_test

import (
	"testing"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
)

// TestIsHTTP: HTTP and HTTP2 are the HTTP class (routed by the Host header), TCP and anything
// that is no protocol are not.
func TestIsHTTP(t *testing.T) {
	for p, want := range map[meshv1alpha1.Protocol]bool{
		meshv1alpha1.ProtocolHTTP:  true,
		meshv1alpha1.ProtocolHTTP2: true,
		meshv1alpha1.ProtocolTCP:   false,
		"":                         false,
		"http":                     false, // the API's spellings are upper case: the enum refuses others
		"GRPC":                     false, // an app protocol, not a protocol
	} {
		if got := p.IsHTTP(); got != want {
			t.Errorf("Protocol(%q).IsHTTP() = %v, want %v", p, got, want)
		}
	}
}
