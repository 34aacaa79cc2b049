// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package resolve_test

import (
	"strings"
	"testing"

	"github.com/aether-mesh/aether-operator/internal/resolve"
)

// TestNotMeshName pins the proxy port's answer to a host that is no mesh service: 404 with
// not-mesh-name, a body naming the mesh's spelling and NO_PROXY, within the body bound.
func TestNotMeshName(t *testing.T) {
	r := resolve.NotMeshName("aether.internal")
	if r.Outcome != resolve.NotMesh || resolve.HTTPStatus(r.Outcome) != 404 || r.Error != resolve.NotAMeshName {
		t.Fatalf("NotMeshName = %s %d %s, want NotMesh 404 not-mesh-name", r.Outcome, resolve.HTTPStatus(r.Outcome), r.Error)
	}
	for _, want := range []string{"<service>.<namespace>.aether.internal:<port>", "NO_PROXY"} {
		if !strings.Contains(r.Body, want) {
			t.Errorf("NotMeshName body %q does not name %q", r.Body, want)
		}
	}
	if len(r.Body) > resolve.MaxBodyLength {
		t.Errorf("NotMeshName body is %d bytes, over MaxBodyLength %d", len(r.Body), resolve.MaxBodyLength)
	}
}
