// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package resolve_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aether-mesh/aether-operator/internal/golden"
	"github.com/aether-mesh/aether-operator/internal/portspec"
	"github.com/aether-mesh/aether-operator/internal/resolve"
)

var update = flag.Bool("update", false, "rewrite testdata/*.out.json from Surface, and delete the orphaned ones")

const (
	inSuffix  = ".in.json"
	outSuffix = ".out.json"
)

// surfaceCase is a testdata/<case>.in.json file: a port set (ports in any order) and the hosts
// the service is dialled by.
type surfaceCase struct {
	PortSet portspec.PortSet `json:"portSet"`
	Hosts   []string         `json:"hosts"`
}

// TestSurfaceGolden compares the dial surface of each testdata/<case>.in.json with
// testdata/<case>.out.json. Regenerate with go test ./internal/resolve -update, and review the
// diff against DESIGN section 5.
func TestSurfaceGolden(t *testing.T) {
	inputs, err := filepath.Glob(filepath.Join("testdata", "*"+inSuffix))
	if err != nil {
		t.Fatal(err)
	}
	if len(inputs) == 0 {
		t.Fatal("no testdata/*" + inSuffix)
	}
	cases := map[string]bool{}
	for _, in := range inputs {
		name := strings.TrimSuffix(filepath.Base(in), inSuffix)
		cases[name] = true
		t.Run(name, func(t *testing.T) {
			got := surfaceJSON(t, in)
			out := filepath.Join("testdata", name+outSuffix)
			if *update {
				if err := os.WriteFile(out, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(out)
			if err != nil {
				t.Fatalf("%v (go test ./internal/resolve -update writes it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("Surface of %s differs from %s (go test ./internal/resolve -update rewrites it; review the diff):\n%s",
					in, out, golden.Diff(string(want), string(got)))
			}
		})
	}

	outputs, err := filepath.Glob(filepath.Join("testdata", "*"+outSuffix))
	if err != nil {
		t.Fatal(err)
	}
	for _, out := range outputs {
		if cases[strings.TrimSuffix(filepath.Base(out), outSuffix)] {
			continue
		}
		if *update {
			if err := os.Remove(out); err != nil {
				t.Fatal(err)
			}
			t.Logf("deleted orphaned %s", out)
			continue
		}
		t.Errorf("%s has no %s (go test ./internal/resolve -update deletes it)", out, inSuffix)
	}
}

// surfaceJSON reads a case and renders its surface as the golden file holds it.
func surfaceJSON(t *testing.T, in string) []byte {
	t.Helper()
	data, err := os.ReadFile(in)
	if err != nil {
		t.Fatal(err)
	}
	var c surfaceCase
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		t.Fatalf("%s: %v", in, err)
	}
	if len(c.Hosts) == 0 {
		t.Fatalf("%s: no hosts", in)
	}
	s := portspec.NewPortSet(c.PortSet.Primary, c.PortSet.Ports)
	got, err := json.MarshalIndent(resolve.Surface(s, c.Hosts...), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(got, '\n')
}

// TestSurfaceGoldenCases keeps the cases the design review relies on, and checks that every case
// uses the hosts of payments in shop.
func TestSurfaceGoldenCases(t *testing.T) {
	hosts := resolve.Hosts("payments", "shop", resolve.DefaultMeshDomain)
	for _, name := range []string{"mixed", "tcp-only", "http-only", "port-80-and-443-tcp", "443-http", "no-ports"} {
		data, err := os.ReadFile(filepath.Join("testdata", name+inSuffix))
		if err != nil {
			t.Errorf("case %s: %v", name, err)
			continue
		}
		var c surfaceCase
		if err := json.Unmarshal(data, &c); err != nil {
			t.Errorf("case %s: %v", name, err)
			continue
		}
		if !slices.Equal(c.Hosts, hosts) {
			t.Errorf("case %s: hosts %q; want resolve.Hosts(payments, shop, %s) = %q", name, c.Hosts, resolve.DefaultMeshDomain, hosts)
		}
	}
}
