// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package plugin

import (
	"context"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/resolve"
)

// TestDialAgreesWithStatus: for every row of each fixture service's status.dialSurface (what the
// controller writes, and kubectl describe shows), dial's answer for that spelling — parsed from
// text as a user types it — is the row: the same outcome, x-aether-error, port and protocol, and
// the same reason word for word (except the "any other port" rows, which speak of every port).
func TestDialAgreesWithStatus(t *testing.T) {
	const host = "payments.shop"
	for _, name := range []string{"payments", "web"} {
		ms := &meshv1alpha1.MeshService{}
		if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: fixtureNamespace, Name: name}, ms); err != nil {
			t.Fatal(err)
		}
		if len(ms.Status.DialSurface) == 0 {
			t.Fatalf("MeshService %s has no dial surface", name)
		}
		set := PortSetOf(ms.Status)
		for _, row := range ms.Status.DialSurface {
			written := strings.ReplaceAll(strings.ReplaceAll(row.Address, resolve.NamePlaceholder, host), resolve.AnyOtherPort, "7")
			var s Spelling
			var err error
			if header, ok := strings.CutPrefix(written, resolve.HostRowPrefix); ok {
				s, err = ParseSpelling("", header)
			} else {
				s, err = ParseSpelling(written, "")
			}
			if err != nil {
				t.Errorf("%s: row %q: %v", name, row.Address, err)
				continue
			}
			got := Answer(set, s)
			var port int32
			if row.Port != nil {
				port = *row.Port
			}
			if string(got.Outcome) != string(row.Outcome) || string(got.Error) != string(row.Error) || got.Port != port || got.Protocol != row.Protocol {
				t.Errorf("%s: %s: dial answers %s %s port %d %s; the status row says %s %s port %d %s", name, written,
					got.Outcome, got.Error, got.Port, got.Protocol, row.Outcome, row.Error, port, row.Protocol)
			}
			if want := strings.ReplaceAll(row.Reason, resolve.NamePlaceholder, host); !strings.Contains(row.Address, resolve.AnyOtherPort) && got.Reason != want {
				t.Errorf("%s: %s: dial's reason\n%s\nthe status row's\n%s", name, written, got.Reason, want)
			}
		}
	}
}
