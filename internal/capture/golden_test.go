// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package capture_test

import (
	"flag"
	"maps"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aether-mesh/aether-operator/internal/capture"
	"github.com/aether-mesh/aether-operator/internal/golden"
	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/testroot"
	"github.com/aether-mesh/aether-operator/internal/xds/xdstest"
)

var update = flag.Bool("update", false, "rewrite testdata/*.nft from Build, and delete the orphaned ones")

const (
	goldenDir    = "testdata"
	goldenSuffix = ".nft"
)

// goldenCase is the client pod of a mesh, in a capture mode, with the node's options.
type goldenCase struct {
	mesh model.Mesh
	pod  model.LocalPod
	opts capture.Options
}

// clientPod is the scenarios' client, web/frontend-0, in mode (its own when empty).
func clientPod(t testing.TB, m model.Mesh, mode model.CaptureMode) model.LocalPod {
	t.Helper()
	i := slices.IndexFunc(m.Pods, func(p model.LocalPod) bool { return p.Namespace == "web" && p.Name == "frontend-0" })
	if i < 0 {
		t.Fatal("the mesh has no local pod web/frontend-0")
	}
	pod := m.Pods[i]
	if mode != "" {
		pod.Capture = mode
	}
	return pod
}

// goldenCases are every xdstest scenario (the client in its own mode: surface, or scoped in the
// scoped scenario), each mode on the mixed mesh, without and with mesh DNS, the exclusions, the
// node's addresses, and a mesh with an IPv6 VIP.
func goldenCases(t testing.TB) map[string]goldenCase {
	cases := map[string]goldenCase{}
	for name, m := range xdstest.All() {
		cases[name] = goldenCase{mesh: m, pod: clientPod(t, m, "")}
	}
	mixed := xdstest.MixedHTTPPrimary()
	for _, mode := range model.CaptureModes {
		cases["mode-"+string(mode)] = goldenCase{mesh: mixed, pod: clientPod(t, mixed, mode)}
		withDNS := clientPod(t, mixed, mode)
		withDNS.MeshDNS = true
		cases["mesh-dns-"+string(mode)] = goldenCase{mesh: mixed, pod: withDNS}
	}
	excluding := clientPod(t, mixed, model.CaptureSurface)
	excluding.ExcludeOutboundPorts = []int32{5432, 6379}
	uid := uint32(1337)
	never := []netip.Prefix{netip.MustParsePrefix("192.0.2.10/32"), netip.MustParsePrefix("203.0.113.0/24"), netip.MustParsePrefix("2001:db8::10/128")}
	cases["exclusions"] = goldenCase{mesh: mixed, pod: excluding, opts: capture.Options{ProxyUID: &uid, Never: never}}
	node := []netip.Addr{netip.MustParseAddr("10.244.1.1"), netip.MustParseAddr("192.0.2.7"), netip.MustParseAddr("2001:db8::7"),
		netip.MustParseAddr("10.96.0.10")} // the last is payments' VIP, as kube-ipvs0 holds it: left out
	cases["node-addresses"] = goldenCase{mesh: mixed, pod: clientPod(t, mixed, model.CaptureSurface), opts: capture.Options{Node: node}}
	cases["dual-stack"] = goldenCase{mesh: dualStack(mixed), pod: clientPod(t, mixed, model.CaptureSurface)}
	cases["dual-stack-all"] = goldenCase{mesh: dualStack(mixed), pod: clientPod(t, mixed, model.CaptureAll)}
	return cases
}

// dualStack is m with payments' VIP moved to IPv6.
func dualStack(m model.Mesh) model.Mesh {
	m.Services = slices.Clone(m.Services)
	for i, s := range m.Services {
		if s.Name == "payments" {
			m.Services[i].VIP = "fd00:10:96::10"
		}
	}
	return m
}

// render is a case's golden text: a comment naming the pod and its mode, then the table.
func render(c goldenCase) string {
	return "# " + c.pod.Namespace + "/" + c.pod.Name + ", capture mode " + string(c.pod.Capture) + "\n" +
		capture.Build(c.mesh, c.pod, c.opts).String()
}

// TestGolden renders each case's table and compares it with testdata/<case>.nft. Regenerate with
// go test ./internal/capture -update, and review the diff against DESIGN section 8.
func TestGolden(t *testing.T) {
	cases := goldenCases(t)
	names := slices.Sorted(maps.Keys(cases))
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			c := cases[name]
			if err := capture.Build(c.mesh, c.pod, c.opts).Validate(); err != nil {
				t.Fatalf("Build gave an invalid ruleset: %v", err)
			}
			golden.Compare(t, goldenDir, name, goldenSuffix, []byte(render(c)), *update)
		})
	}
	golden.Orphans(t, goldenDir, names, "", goldenSuffix, *update)
}

// TestGoldenIsNftSyntax: nft itself reads every golden file (`nft -c -f`: parse and check
// against the kernel, commit nothing), in a network namespace of its own (unshare -n), so the
// text is the kernel's ruleset language, not a look-alike. The negative control is a file with a
// misspelt keyword, which nft must refuse.
func TestGoldenIsNftSyntax(t *testing.T) {
	testroot.Require(t, "nft -c in a network namespace of its own")
	nft := nftBinary(t)
	files, err := filepath.Glob(filepath.Join(goldenDir, "*"+goldenSuffix))
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden files: %v", err)
	}
	for _, f := range files {
		if out, err := nftCheck(nft, f); err != nil {
			t.Errorf("nft -c -f %s: %v\n%s", f, err, out)
		}
	}
	t.Run("negative control: a misspelt keyword", func(t *testing.T) {
		text, err := os.ReadFile(files[0])
		if err != nil {
			t.Fatal(err)
		}
		bad := filepath.Join(t.TempDir(), "bad.nft")
		if err := os.WriteFile(bad, []byte(strings.Replace(string(text), "redirect to", "redirekt to", 1)), 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := nftCheck(nft, bad)
		if err == nil {
			t.Fatalf("nft accepted a file with redirekt:\n%s", text)
		}
		t.Logf("nft refuses it: %s", firstLine(string(out)))
	})
}

// nftCheck runs nft -c -f file in a new network namespace.
func nftCheck(nft, file string) ([]byte, error) {
	return exec.Command("unshare", "--net", nft, "-c", "-f", file).CombinedOutput()
}

// nftBinary is the nft command line tool: tests only (the applier never runs it).
func nftBinary(t testing.TB) string {
	t.Helper()
	path, err := exec.LookPath("nft")
	if err != nil {
		t.Fatalf("nft is not installed (apt-get install nftables; .ci/run installs it): %v", err)
	}
	return path
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}
