// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xds_test

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"sigs.k8s.io/yaml"

	"github.com/aether-mesh/aether-operator/internal/golden"
	"github.com/aether-mesh/aether-operator/internal/xds"
	"github.com/aether-mesh/aether-operator/internal/xds/xdstest"
)

// goldenKinds are the golden files of a scenario, one per resource type, so that a review sees
// which kind of resource a change touched.
var goldenKinds = []string{"clusters", "endpoints", "listeners", "routes", "runtimes"}

const goldenSuffix = ".yaml"

// TestGolden builds every scenario of xdstest and compares each resource type, as YAML, with
// testdata/<scenario>/<type>.yaml. With -update the files are rewritten, and files and scenario
// directories no scenario produces are deleted; review the diff against DESIGN sections 5 and 8.
func TestGolden(t *testing.T) {
	scenarios := xdstest.All()
	names := slices.Sorted(maps.Keys(scenarios))
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			res, err := xds.Build(scenarios[name])
			if err != nil {
				t.Fatalf("Build: %v", err)
			}
			dir := filepath.Join("testdata", name)
			compareKinds(t, dir, res)
			golden.Orphans(t, dir, goldenKinds, "", goldenSuffix, *xds.Update)
		})
	}
	orphanScenarios(t, names)
}

// compareKinds compares res, rendered a file per resource kind, with the golden files in dir
// (with -update: writes them there, dir made first).
func compareKinds(t *testing.T, dir string, res xds.Resources) {
	t.Helper()
	if *xds.Update {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	rendered := renderKinds(t, res)
	for _, kind := range goldenKinds {
		if kind == "runtimes" && res.Runtimes == nil {
			continue // a proxyless client's rendering: gRPC reads no runtime layer
		}
		golden.Compare(t, dir, kind, goldenSuffix, rendered[kind], *xds.Update)
	}
}

// renderKinds renders each resource type of res as YAML.
func renderKinds(t testing.TB, res xds.Resources) map[string][]byte {
	return map[string][]byte{
		"clusters":  render(t, res.Clusters),
		"endpoints": render(t, res.Endpoints),
		"listeners": render(t, res.Listeners),
		"routes":    render(t, res.Routes),
		"runtimes":  render(t, res.Runtimes),
	}
}

// render writes resources as a YAML list, deterministically: protojson (every Any resolved to
// its message and "@type") re-read as plain JSON, so protojson's deliberately unstable
// whitespace never reaches the file, then YAML with sorted keys.
func render[T proto.Message](t testing.TB, resources []T) []byte {
	t.Helper()
	list := make([]json.RawMessage, 0, len(resources))
	for _, r := range resources {
		b, err := protojson.MarshalOptions{Multiline: true, Indent: "  "}.Marshal(r)
		if err != nil {
			t.Fatalf("rendering %T: %v", r, err)
		}
		list = append(list, b)
	}
	b, err := json.Marshal(list)
	if err != nil {
		t.Fatal(err)
	}
	out, err := yaml.JSONToYAML(b)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// orphanScenarios fails for every directory of testdata that is no scenario's (a scenario
// renamed or removed); with -update it deletes it. testdata/fuzz is the fuzzer's corpus and
// testdata/bootstrap the bootstrap's golden files (TestBootstrapGolden), testdata/proxyless the
// proxyless rendering's (TestProxylessGolden).
func orphanScenarios(t *testing.T, names []string) {
	t.Helper()
	entries, err := os.ReadDir("testdata")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !e.IsDir() || e.Name() == "fuzz" || e.Name() == "bootstrap" || e.Name() == "proxyless" || e.Name() == "proxyless-server" || slices.Contains(names, e.Name()) {
			continue
		}
		dir := filepath.Join("testdata", e.Name())
		if *xds.Update {
			if err := os.RemoveAll(dir); err != nil {
				t.Fatal(err)
			}
			t.Logf("deleted %s: no scenario of that name", dir)
			continue
		}
		t.Errorf("%s is no scenario's (xdstest.All): delete it, or run with -update", dir)
	}
}

// TestRender: a resource with a typed config renders with the Any resolved (its "@type" and its
// fields by their JSON names), the same bytes every time.
func TestRender(t *testing.T) {
	proxy, err := anypb.New(&tcpproxyv3.TcpProxy{StatPrefix: xds.CapturePassthroughChain,
		ClusterSpecifier: &tcpproxyv3.TcpProxy_Cluster{Cluster: xds.PassthroughCluster}})
	if err != nil {
		t.Fatal(err)
	}
	listener := &listenerv3.Listener{Name: xds.CaptureListener(xds.PodKey("web", "frontend-0")),
		DefaultFilterChain: &listenerv3.FilterChain{Name: xds.CapturePassthroughChain, Filters: []*listenerv3.Filter{{
			Name: "envoy.filters.network.tcp_proxy", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: proxy}}}}}
	got := string(render(t, []*listenerv3.Listener{listener}))
	want := `- defaultFilterChain:
    filters:
    - name: envoy.filters.network.tcp_proxy
      typedConfig:
        '@type': type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy
        cluster: passthrough
        statPrefix: cap_passthrough
    name: cap_passthrough
  name: capture_web/frontend-0
`
	if got != want {
		t.Errorf("rendered:\n%s\nwant:\n%s", got, want)
	}
	if again := string(render(t, []*listenerv3.Listener{listener})); again != got {
		t.Errorf("two renderings differ:\n%s", golden.Diff(got, again))
	}
	if empty := string(render(t, []*listenerv3.Listener{})); empty != "[]\n" {
		t.Errorf("no resources render as %q", empty)
	}
}
