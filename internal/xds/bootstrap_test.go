// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xds

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	overloadv3 "github.com/envoyproxy/go-control-plane/envoy/config/overload/v3"
	downstreamconnectionsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/resource_monitors/downstream_connections/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"sigs.k8s.io/yaml"

	"github.com/aether-mesh/aether-operator/internal/golden"
)

const bootstrapDir = "testdata/bootstrap"

// TestBootstrapGolden renders each testdata/bootstrap/<case>.in.yaml (a BootstrapConfig) and
// compares the YAML with <case>.out.yaml. Each output is also read back the way Envoy reads a
// bootstrap file (YAML → JSON → the proto, unknown fields refused) and must equal what was
// rendered, and the ADS stream must run on a static cluster of the bootstrap.
func TestBootstrapGolden(t *testing.T) {
	cases := golden.Cases(t, bootstrapDir, ".in.yaml")
	for _, name := range cases {
		t.Run(name, func(t *testing.T) {
			in, err := os.ReadFile(filepath.Join(bootstrapDir, name+".in.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			var c BootstrapConfig
			if err := yaml.UnmarshalStrict(in, &c); err != nil {
				t.Fatal(err)
			}
			bs, err := Bootstrap(c)
			if err != nil {
				t.Fatal(err)
			}
			out, err := BootstrapYAML(bs)
			if err != nil {
				t.Fatal(err)
			}
			golden.Compare(t, bootstrapDir, name, ".out.yaml", out, *Update)

			for format, encoded := range map[string][]byte{"yaml": out, "json": mustJSON(t, bs)} {
				back := readBootstrap(t, encoded)
				if !proto.Equal(back, bs) {
					t.Errorf("the %s bootstrap does not read back as the bootstrap rendered:\n%s", format, encoded)
				}
			}
			adsCluster := bs.GetDynamicResources().GetAdsConfig().GetGrpcServices()[0].GetEnvoyGrpc().GetClusterName()
			found := false
			for _, cl := range bs.GetStaticResources().GetClusters() {
				found = found || cl.GetName() == adsCluster
			}
			if !found {
				t.Errorf("the ADS stream runs on cluster %q, which the bootstrap does not define", adsCluster)
			}
		})
	}
	golden.Orphans(t, bootstrapDir, cases, ".in.yaml", ".out.yaml", *Update)
}

func mustJSON(t *testing.T, bs *bootstrapv3.Bootstrap) []byte {
	t.Helper()
	out, err := BootstrapJSON(bs)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// readBootstrap parses a bootstrap file the way Envoy does: YAML (JSON is YAML) to JSON, then
// the proto's JSON mapping, refusing unknown fields.
func readBootstrap(t *testing.T, data []byte) *bootstrapv3.Bootstrap {
	t.Helper()
	raw, err := yaml.YAMLToJSON(data)
	if err != nil {
		t.Fatal(err)
	}
	bs := &bootstrapv3.Bootstrap{}
	if err := protojson.Unmarshal(raw, bs); err != nil {
		t.Fatalf("reading the bootstrap back: %v\n%s", err, data)
	}
	return bs
}

// TestBootstrapAdminLoopbackOnly: the admin endpoint listens on a loopback IP and a real port,
// or the bootstrap is refused with an error that names the field and its value.
func TestBootstrapAdminLoopbackOnly(t *testing.T) {
	for addr, want := range map[string]string{
		"127.0.0.1:19000":          "127.0.0.1:19000",
		"127.0.0.2:9901":           "127.0.0.2:9901",
		"[::1]:19000":              "[::1]:19000",
		"[::ffff:127.0.0.1]:19000": "127.0.0.1:19000", // Envoy binds the IPv4 address
	} {
		bs, err := Bootstrap(BootstrapConfig{NodeID: "node-a", AdminAddress: addr})
		if err != nil {
			t.Errorf("AdminAddress %q: %v", addr, err)
			continue
		}
		sa := bs.GetAdmin().GetAddress().GetSocketAddress()
		if got := net.JoinHostPort(sa.GetAddress(), strconv.Itoa(int(sa.GetPortValue()))); got != want {
			t.Errorf("AdminAddress %q: the admin listens on %s, want %s", addr, got, want)
		}
	}
	for addr, why := range map[string]string{
		"0.0.0.0:19000":          "not a loopback address",
		"10.1.2.3:19000":         "not a loopback address",
		"192.168.0.7:9901":       "not a loopback address",
		"[::]:19000":             "not a loopback address",
		"[fe80::1%eth0]:19000":   "not a loopback address",
		"[::1%lo]:19000":         "not a loopback address",
		":19000":                 "not an IP address",
		"localhost:19000":        "not an IP address",
		"127.0.0.1":              "not <ip>:<port>",
		"127.0.0.1:0":            "not 1-65535",
		"127.0.0.1:admin":        "not 1-65535",
		"127.0.0.1:70000":        "not 1-65535",
		"node.example.com:19000": "not an IP address",
	} {
		_, err := Bootstrap(BootstrapConfig{NodeID: "node-a", AdminAddress: addr})
		if err == nil {
			t.Errorf("AdminAddress %q was accepted", addr)
			continue
		}
		for _, want := range []string{"BootstrapConfig.AdminAddress", `"` + addr + `"`, why, DefaultAdminAddress} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("AdminAddress %q: the error does not say %q: %v", addr, want, err)
			}
		}
	}
}

// TestBootstrapRefusesBadInput: each input Envoy could not use is refused, naming the field,
// the value and the fix.
func TestBootstrapRefusesBadInput(t *testing.T) {
	long := "/var/run/" + strings.Repeat("a", maxUnixSocketPath) + "/xds.sock"
	for name, tc := range map[string]struct {
		config BootstrapConfig
		want   []string
	}{
		"no node ID":      {BootstrapConfig{}, []string{"BootstrapConfig.NodeID is empty", "--node-name"}},
		"relative socket": {BootstrapConfig{NodeID: "n", XDSSocket: "xds.sock"}, []string{"BootstrapConfig.XDSSocket", `"xds.sock"`, "absolute", DefaultXDSSocket}},
		"long socket":     {BootstrapConfig{NodeID: "n", XDSSocket: long}, []string{"BootstrapConfig.XDSSocket", long, "longer than a unix socket address holds", DefaultXDSSocket}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Bootstrap(tc.config)
			if err == nil {
				t.Fatal("accepted")
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the error does not say %q: %v", want, err)
				}
			}
		})
	}
}

// TestBootstrapValidatesPackedMessages is the gate's negative control: a packed message its own
// validator refuses (a connection limit below 1) fails Bootstrap, although the bootstrap's
// ValidateAll, which does not descend into an Any, accepts the same bootstrap.
func TestBootstrapValidatesPackedMessages(t *testing.T) {
	_, err := Bootstrap(BootstrapConfig{NodeID: "node-a", maxDownstreamConnections: -1})
	if err == nil {
		t.Fatal("a downstream connection limit of -1 was packed into the bootstrap")
	}
	for _, want := range []string{"the overload manager's downstream connections monitor is invalid", "MaxActiveDownstreamConnections"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q: %v", want, err)
		}
	}

	// Why the pack-time check is needed: the same invalid config, packed without it, passes the
	// outer validator.
	bs, err := Bootstrap(BootstrapConfig{NodeID: "node-a"})
	if err != nil {
		t.Fatal(err)
	}
	invalid, err := anypb.New(&downstreamconnectionsv3.DownstreamConnectionsConfig{MaxActiveDownstreamConnections: -1})
	if err != nil {
		t.Fatal(err)
	}
	bs.GetOverloadManager().GetResourceMonitors()[0].ConfigType = &overloadv3.ResourceMonitor_TypedConfig{TypedConfig: invalid}
	if err := bs.ValidateAll(); err != nil {
		t.Fatalf("the outer validator descended into the Any after all (the pack-time check may be redundant): %v", err)
	}
}

// TestBootstrapDeltaForOnDemand: on-demand cluster discovery asks for clusters by name on a delta
// stream only, so a node that fetches on demand (Delta, the agent's --upstreams=declared) gets an
// ADS of DELTA_GRPC, and one that carries every service keeps state of the world.
func TestBootstrapDeltaForOnDemand(t *testing.T) {
	for delta, want := range map[bool]corev3.ApiConfigSource_ApiType{true: corev3.ApiConfigSource_DELTA_GRPC, false: corev3.ApiConfigSource_GRPC} {
		bs, err := Bootstrap(BootstrapConfig{NodeID: "node-a", Delta: delta})
		if err != nil {
			t.Fatal(err)
		}
		if got := bs.GetDynamicResources().GetAdsConfig().GetApiType(); got != want {
			t.Errorf("Delta %v: ADS api_type %s, want %s", delta, got, want)
		}
	}
}
