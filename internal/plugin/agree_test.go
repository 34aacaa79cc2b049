// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package plugin

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/meshservice"
	"github.com/aether-mesh/aether-operator/internal/resolve"
	"github.com/aether-mesh/aether-operator/internal/workloadidentity"
)

// TestDialAgreesWithStatus: for every row of each fixture service's status.dialSurface (what the
// controller writes, and kubectl describe shows), dial's answer for that spelling — parsed from
// text as a user types it — is the row: the same outcome, x-aether-error, port and protocol, and
// the same reason word for word (except the "any other port" rows, which speak of every port).
// The same holds of each service's status as a manager without an identity issuer writes it
// (--identity-issuer=none: its raw-TCP rows refused), which dial reads from the status itself
// (IssuerOf); read as if written with an issuer, that status is caught disagreeing.
func TestDialAgreesWithStatus(t *testing.T) {
	for _, name := range []string{"payments", "web"} {
		ms := &meshv1alpha1.MeshService{}
		if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: fixtureNamespace, Name: name}, ms); err != nil {
			t.Fatal(err)
		}
		if len(ms.Status.DialSurface) == 0 {
			t.Fatalf("MeshService %s has no dial surface", name)
		}
		for _, d := range dialDisagreements(t, ms.Status, IssuerOf(ms.Status)) {
			t.Errorf("%s: %s", name, d)
		}

		var eps meshv1alpha1.MeshEndpointList
		if err := env.Client.List(context.Background(), &eps, client.InNamespace(fixtureNamespace)); err != nil {
			t.Fatal(err)
		}
		eps.Items = slices.DeleteFunc(eps.Items, func(ep meshv1alpha1.MeshEndpoint) bool { return ep.Spec.ServiceName != name })
		out, err := meshservice.Translate(meshservice.Input{Namespace: fixtureNamespace, Name: name, MeshDomain: "aether.internal",
			Issuer: workloadidentity.NoIssuer, Endpoints: eps.Items})
		if err != nil {
			t.Fatal(err)
		}
		if IssuerOf(out.Status) != workloadidentity.NoIssuer {
			t.Errorf("%s: the status written without an issuer reads as written under %s", name, IssuerOf(out.Status))
		}
		for _, d := range dialDisagreements(t, out.Status, IssuerOf(out.Status)) {
			t.Errorf("%s without an issuer: %s", name, d)
		}
		if d := dialDisagreements(t, out.Status, workloadidentity.SPIRE); len(d) == 0 {
			t.Errorf("%s: its status without an issuer, read as if written with one, agrees with dial: the check proves nothing", name)
		} else {
			t.Logf("negative control: %s without an issuer, read with one: %s", name, d[0])
		}
	}
}

// dialDisagreements says where dial's answers, in a mesh whose identities issuer issues, differ
// from the rows of st.
func dialDisagreements(t *testing.T, st meshv1alpha1.MeshServiceStatus, issuer workloadidentity.Issuer) []string {
	t.Helper()
	const host = "payments.shop"
	var out []string
	set := PortSetOf(st)
	for _, row := range st.DialSurface {
		written := strings.ReplaceAll(strings.ReplaceAll(row.Address, resolve.NamePlaceholder, host), resolve.AnyOtherPort, "7")
		var s Spelling
		var err error
		if header, ok := strings.CutPrefix(written, resolve.HostRowPrefix); ok {
			s, err = ParseSpelling("", header)
		} else {
			s, err = ParseSpelling(written, "")
		}
		if err != nil {
			out = append(out, fmt.Sprintf("row %q: %v", row.Address, err))
			continue
		}
		got := Answer(set, issuer, s)
		var port int32
		if row.Port != nil {
			port = *row.Port
		}
		if string(got.Outcome) != string(row.Outcome) || string(got.Error) != string(row.Error) || got.Port != port || got.Protocol != row.Protocol {
			out = append(out, fmt.Sprintf("%s: dial answers %s %s port %d %s; the status row says %s %s port %d %s", written,
				got.Outcome, got.Error, got.Port, got.Protocol, row.Outcome, row.Error, port, row.Protocol))
		}
		if want := strings.ReplaceAll(row.Reason, resolve.NamePlaceholder, host); !strings.Contains(row.Address, resolve.AnyOtherPort) && got.Reason != want {
			out = append(out, fmt.Sprintf("%s: dial's reason\n%s\nthe status row's\n%s", written, got.Reason, want))
		}
	}
	return out
}
