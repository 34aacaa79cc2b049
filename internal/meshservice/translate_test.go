// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package meshservice_test

import (
	"flag"
	"slices"
	"testing"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/golden"
	"github.com/aether-mesh/aether-operator/internal/meshservice"
)

var update = flag.Bool("update", false, "rewrite testdata/*.out.yaml")

const (
	inSuffix  = ".in.yaml"
	outSuffix = ".out.yaml"
)

// TestTranslateGolden translates every testdata/<case>.in.yaml and compares the Output, as
// sigs.k8s.io/yaml marshals it, with testdata/<case>.out.yaml. With -update the outputs are
// rewritten and outputs without an input deleted; review them against DESIGN sections 4 and 5.
func TestTranslateGolden(t *testing.T) {
	cases := goldenCases(t)
	if len(cases) == 0 {
		t.Fatalf("no testdata/*%s found", inSuffix)
	}
	for _, name := range cases {
		t.Run(name, func(t *testing.T) {
			in := readInput(t, name)
			checkInput(t, in)
			out, err := meshservice.Translate(in)
			if err != nil {
				t.Fatalf("case %s: Translate: %v", name, err)
			}
			golden.Compare(t, "testdata", name, outSuffix, marshal(t, out), *update)
		})
	}

	golden.Orphans(t, "testdata", cases, inSuffix, outSuffix, *update)
}

// goldenCases are the case names of testdata/*.in.yaml, sorted.
func goldenCases(t testing.TB) []string {
	return golden.Cases(t, "testdata", inSuffix)
}

// readInput reads testdata/<name>.in.yaml strictly: a misspelt field fails instead of silently
// leaving the input zero.
func readInput(t testing.TB, name string) meshservice.Input {
	return golden.ReadStrict[meshservice.Input](t, "testdata", name, inSuffix)
}

// checkInput refuses an input the API server would not let exist, so that every golden output
// is one a cluster can produce: the MeshEndpoints' ports sorted and unique, none of the mesh's
// own, the primary among them, the portsSummary FormatPorts' spelling, a creation timestamp,
// and a unique name per endpoint.
func checkInput(t testing.TB, in meshservice.Input) {
	t.Helper()
	mesh := []int32{meshv1alpha1.MeshHTTPPort, meshv1alpha1.MeshTCPPort, meshv1alpha1.ProxyCapturePort, meshv1alpha1.ProxyInboundPort}
	seen := map[string]bool{}
	for _, ep := range in.Endpoints {
		if ep.Name == "" || seen[ep.Name] {
			t.Fatalf("endpoint name %q is empty or repeated", ep.Name)
		}
		seen[ep.Name] = true
		if ep.CreationTimestamp.IsZero() {
			t.Fatalf("endpoint %s has no metadata.creationTimestamp", ep.Name)
		}
		ports := ep.Spec.Ports
		if len(ports) == 0 || !slices.IsSortedFunc(ports, func(a, b meshv1alpha1.PortProtocol) int { return int(a.Port - b.Port) }) {
			t.Fatalf("endpoint %s: ports %v are empty or not sorted", ep.Name, ports)
		}
		primaryDeclared := false
		for i, p := range ports {
			if i > 0 && ports[i-1].Port == p.Port {
				t.Fatalf("endpoint %s declares port %d twice", ep.Name, p.Port)
			}
			if slices.Contains(mesh, p.Port) {
				t.Fatalf("endpoint %s declares the mesh's own port %d", ep.Name, p.Port)
			}
			primaryDeclared = primaryDeclared || p.Port == ep.Spec.PrimaryPort
		}
		if !primaryDeclared {
			t.Fatalf("endpoint %s: primaryPort %d is not among its ports", ep.Name, ep.Spec.PrimaryPort)
		}
		if want := meshv1alpha1.FormatPorts(ports); ep.Spec.PortsSummary != want {
			t.Fatalf("endpoint %s: portsSummary %q, want %q", ep.Name, ep.Spec.PortsSummary, want)
		}
	}
}

func marshal(t testing.TB, out meshservice.Output) []byte {
	return golden.YAML(t, out)
}
