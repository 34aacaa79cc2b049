// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xds

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"strconv"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	overloadv3 "github.com/envoyproxy/go-control-plane/envoy/config/overload/v3"
	downstreamconnectionsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/resource_monitors/downstream_connections/v3"
	fixedheapv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/resource_monitors/fixed_heap/v3"
	upstreamhttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"sigs.k8s.io/yaml"
)

// The node's Envoy starts from a bootstrap the agent writes (cmd/agent --envoy-bootstrap): who it
// is (node ID = the node name, so the agent's snapshot for the node reaches it), where its xDS
// server is (the agent, over a unix socket in a host directory both pods mount) and its admin
// endpoint (loopback only). Everything else, listeners and clusters, arrives over ADS.

const (
	// DefaultXDSSocket is where the agent's xDS server listens when nothing else is said; with the
	// node's Envoy (config/envoy) the agent serves at /var/run/aether/proxy/xds.sock instead, a
	// host directory the agent's and Envoy's pods both mount.
	DefaultXDSSocket = "/var/run/aether/xds.sock"
	// DefaultAdminAddress is the Envoy admin endpoint: loopback of Envoy's own pod (not on the
	// host network, so the two Envoys of a rolling update each have theirs; its helper container
	// reaches it there), in the 19xxx block of the agent's own ports (metrics 19090, probes 19091),
	// away from Envoy's customary 9901.
	DefaultAdminAddress = "127.0.0.1:19000"
	// DefaultEnvoyCluster is the node's service cluster (node.cluster): every node's Envoy is one
	// instance of the same proxy. Envoy names its stats and logs after it.
	DefaultEnvoyCluster = "aether"
	// MaxDownstreamConnections is the node's Envoy's limit on open downstream connections (the
	// overload manager's global_downstream_max_connections monitor): one Envoy serves every meshed
	// pod of its node, and without a global limit a connection flood exhausts its file descriptors
	// and memory, and with them every pod's traffic. Connections over it are closed on accept.
	MaxDownstreamConnections = 50000
	// MaxHeap is the heap the node's Envoy's overload manager measures its pressure against (the
	// fixed_heap monitor): 900 MiB, below the 1 GiB memory limit of config/envoy's container, so
	// that Envoy sheds load before the kernel kills it (and with it every pod's traffic). At
	// ShrinkHeapAt of it Envoy returns free memory to the system; at StopRequestsAt it answers
	// new requests 503 until the pressure falls. A container given a larger limit keeps this cap.
	MaxHeap = 900 << 20
	// ShrinkHeapAt is the fixed_heap pressure at which Envoy returns free memory (shrink_heap).
	ShrinkHeapAt = 0.90
	// StopRequestsAt is the pressure at which it answers new requests 503
	// (stop_accepting_requests).
	StopRequestsAt = 0.98
	// xdsConnectTimeout bounds a connection to the local xDS socket: it is a unix socket on the
	// same node, so a slow connect means the agent is not there, and Envoy should retry soon.
	xdsConnectTimeout = time.Second
	// maxUnixSocketPath is the longest path a unix socket address holds (sun_path is 108 bytes
	// with its terminating NUL).
	maxUnixSocketPath = 107
)

// BootstrapConfig is what a node's Envoy bootstrap depends on. Empty fields take their defaults.
type BootstrapConfig struct {
	// NodeID is the Envoy's node ID: the node's name, the key of its snapshot. Required.
	NodeID string `json:"nodeID"`
	// Cluster is the node's service cluster; default DefaultEnvoyCluster.
	Cluster string `json:"cluster,omitempty"`
	// XDSSocket is the absolute path of the agent's xDS unix socket; default DefaultXDSSocket.
	XDSSocket string `json:"xdsSocket,omitempty"`
	// AdminAddress is the admin endpoint, <loopback IP>:<port>; default DefaultAdminAddress.
	// Anything but a loopback address is refused: the admin endpoint can drain, reconfigure and
	// stop the proxy, and has no authentication.
	AdminAddress string `json:"adminAddress,omitempty"`
	// Delta makes the ADS stream delta xDS instead of state of the world: on-demand cluster
	// discovery (model.UpstreamsDeclared) asks for clusters by name on a delta stream only.
	Delta bool `json:"delta,omitempty"`
	// MaxConnections is the node's cap on Envoy's downstream connections (the overload manager's
	// global_downstream_max_connections); default MaxDownstreamConnections. Each pod's capture
	// and proxy listener hold at most PodListenerConnections of it.
	MaxConnections int64 `json:"maxConnections,omitempty"`

	// maxDownstreamConnections replaces MaxDownstreamConnections (tests: a value the packed
	// monitor's validator refuses shows that packed messages are validated).
	maxDownstreamConnections int64
}

// Bootstrap renders the node's Envoy bootstrap: node, ADS (delta xDS with Delta) over the agent's unix socket (LDS and
// CDS by ADS, everything they reference by ADS too), admin on loopback, an admin runtime layer,
// and the overload manager's downstream connection limit. The bootstrap and every message packed
// into it pass their generated validators; bad input is an error naming the field.
func Bootstrap(c BootstrapConfig) (*bootstrapv3.Bootstrap, error) {
	c = c.withDefaults()
	admin, err := c.adminAddress()
	if err != nil {
		return nil, err
	}
	if err := c.check(); err != nil {
		return nil, err
	}
	b := &builder{}
	ads := corev3.ApiConfigSource_GRPC
	if c.Delta {
		ads = corev3.ApiConfigSource_DELTA_GRPC
	}
	bs := &bootstrapv3.Bootstrap{
		Node: &corev3.Node{Id: c.NodeID, Cluster: c.Cluster},
		StaticResources: &bootstrapv3.Bootstrap_StaticResources{
			Clusters: []*clusterv3.Cluster{b.xdsCluster(c.XDSSocket)},
		},
		DynamicResources: &bootstrapv3.Bootstrap_DynamicResources{
			AdsConfig: &corev3.ApiConfigSource{
				ApiType:             ads,
				TransportApiVersion: corev3.ApiVersion_V3,
				GrpcServices: []*corev3.GrpcService{{TargetSpecifier: &corev3.GrpcService_EnvoyGrpc_{
					EnvoyGrpc: &corev3.GrpcService_EnvoyGrpc{ClusterName: XDSCluster},
				}}},
				// The node is the same on every request of the stream: send it once.
				SetNodeOnFirstMessageOnly: true,
			},
			LdsConfig: adsSource(),
			CdsConfig: adsSource(),
		},
		Admin: &bootstrapv3.Admin{
			Address: socketAddress(admin.Addr().String(), int32(admin.Port())),
			// The admin endpoint must answer when the connection limit is reached: that is when
			// an operator needs it.
			IgnoreGlobalConnLimit: true,
		},
		// No static layer: every runtime value but the agent's is Envoy's built-in default. The
		// agent's layer (RTDS over ADS) holds each pod's listener connection limits
		// (ListenerLimitsLayer). The admin layer, last so that it wins, lets an operator on the
		// node change a value at /runtime_modify (loopback only, like all admin).
		LayeredRuntime: &bootstrapv3.LayeredRuntime{Layers: []*bootstrapv3.RuntimeLayer{{
			Name: ListenerLimitsLayer,
			LayerSpecifier: &bootstrapv3.RuntimeLayer_RtdsLayer_{RtdsLayer: &bootstrapv3.RuntimeLayer_RtdsLayer{
				Name: ListenerLimitsLayer, RtdsConfig: adsSource(),
			}},
		}, {
			Name:           "admin",
			LayerSpecifier: &bootstrapv3.RuntimeLayer_AdminLayer_{AdminLayer: &bootstrapv3.RuntimeLayer_AdminLayer{}},
		}}},
		OverloadManager: &overloadv3.OverloadManager{
			RefreshInterval: durationpb.New(overloadRefresh),
			ResourceMonitors: []*overloadv3.ResourceMonitor{{
				Name: "envoy.resource_monitors.global_downstream_max_connections",
				ConfigType: &overloadv3.ResourceMonitor_TypedConfig{TypedConfig: b.pack("the overload manager's downstream connections monitor",
					&downstreamconnectionsv3.DownstreamConnectionsConfig{MaxActiveDownstreamConnections: c.maxDownstreamConnections})},
			}, {
				Name: FixedHeapMonitor,
				ConfigType: &overloadv3.ResourceMonitor_TypedConfig{TypedConfig: b.pack("the overload manager's heap monitor",
					&fixedheapv3.FixedHeapConfig{MaxHeapSizeBytes: MaxHeap})},
			}},
			Actions: []*overloadv3.OverloadAction{
				heapAction(ShrinkHeapAction, ShrinkHeapAt),
				heapAction(StopRequestsAction, StopRequestsAt),
			},
		},
	}
	b.check("the bootstrap", bs)
	if b.err != nil {
		return nil, b.err
	}
	return bs, nil
}

// The overload manager's heap monitor and the actions it triggers (Envoy's names).
const (
	FixedHeapMonitor   = "envoy.resource_monitors.fixed_heap"
	ShrinkHeapAction   = "envoy.overload_actions.shrink_heap"
	StopRequestsAction = "envoy.overload_actions.stop_accepting_requests"
	// overloadRefresh is how often the monitors are read (Envoy's default, stated).
	overloadRefresh = time.Second
)

// heapAction is the overload action name, triggered when the heap's pressure reaches at.
func heapAction(name string, at float64) *overloadv3.OverloadAction {
	return &overloadv3.OverloadAction{Name: name, Triggers: []*overloadv3.Trigger{{
		Name:         FixedHeapMonitor,
		TriggerOneof: &overloadv3.Trigger_Threshold{Threshold: &overloadv3.ThresholdTrigger{Value: at}},
	}}}
}

// xdsCluster is the static cluster Envoy's ADS stream runs on: the agent's unix socket, HTTP/2
// (gRPC) set explicitly, as a static cluster speaks HTTP/1.1 unless told otherwise.
func (b *builder) xdsCluster(socket string) *clusterv3.Cluster {
	return &clusterv3.Cluster{
		Name:                 XDSCluster,
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
		ConnectTimeout:       durationpb.New(xdsConnectTimeout),
		TypedExtensionProtocolOptions: map[string]*anypb.Any{
			"envoy.extensions.upstreams.http.v3.HttpProtocolOptions": b.pack("the xDS cluster's HTTP/2 protocol options", &upstreamhttpv3.HttpProtocolOptions{
				UpstreamProtocolOptions: &upstreamhttpv3.HttpProtocolOptions_ExplicitHttpConfig_{ExplicitHttpConfig: &upstreamhttpv3.HttpProtocolOptions_ExplicitHttpConfig{
					ProtocolConfig: &upstreamhttpv3.HttpProtocolOptions_ExplicitHttpConfig_Http2ProtocolOptions{Http2ProtocolOptions: &corev3.Http2ProtocolOptions{}},
				}},
			}),
		},
		LoadAssignment: &endpointv3.ClusterLoadAssignment{
			ClusterName: XDSCluster,
			Endpoints: []*endpointv3.LocalityLbEndpoints{{LbEndpoints: []*endpointv3.LbEndpoint{{
				HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
					Address: &corev3.Address{Address: &corev3.Address_Pipe{Pipe: &corev3.Pipe{Path: socket}}},
				}},
			}}}},
		},
	}
}

func (c BootstrapConfig) withDefaults() BootstrapConfig {
	if c.Cluster == "" {
		c.Cluster = DefaultEnvoyCluster
	}
	if c.XDSSocket == "" {
		c.XDSSocket = DefaultXDSSocket
	}
	if c.AdminAddress == "" {
		c.AdminAddress = DefaultAdminAddress
	}
	if c.maxDownstreamConnections == 0 {
		c.maxDownstreamConnections = c.MaxConnections
	}
	if c.maxDownstreamConnections == 0 {
		c.maxDownstreamConnections = MaxDownstreamConnections
	}
	return c
}

// check refuses what the validators would let through but Envoy could not use.
func (c BootstrapConfig) check() error {
	if c.NodeID == "" {
		return fmt.Errorf("xds: BootstrapConfig.NodeID is empty: set it to the node's name (the agent's --node-name), the ID its snapshot is served under")
	}
	if c.MaxConnections < 0 {
		return fmt.Errorf("xds: BootstrapConfig.MaxConnections is %d: it caps the node's downstream connections and must be positive, or 0 for the default %d", c.MaxConnections, MaxDownstreamConnections)
	}
	if !filepath.IsAbs(c.XDSSocket) {
		return fmt.Errorf("xds: BootstrapConfig.XDSSocket %q is not an absolute path: Envoy resolves it from its own working directory, not the agent's; use an absolute path such as %s", c.XDSSocket, DefaultXDSSocket)
	}
	if len(c.XDSSocket) > maxUnixSocketPath {
		return fmt.Errorf("xds: BootstrapConfig.XDSSocket %q is %d bytes, longer than a unix socket address holds (%d): use a shorter path such as %s", c.XDSSocket, len(c.XDSSocket), maxUnixSocketPath, DefaultXDSSocket)
	}
	return nil
}

// adminAddress parses AdminAddress, refusing anything but a loopback IP and a port.
func (c BootstrapConfig) adminAddress() (netip.AddrPort, error) {
	const fix = "the admin endpoint has no authentication and can drain, reconfigure and stop the proxy, so it listens on loopback only: use " + DefaultAdminAddress + " or another 127.0.0.0/8 or [::1] address"
	host, port, err := net.SplitHostPort(c.AdminAddress)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("xds: BootstrapConfig.AdminAddress %q is not <ip>:<port> (%v): %s", c.AdminAddress, err, fix)
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("xds: BootstrapConfig.AdminAddress %q: the host %q is not an IP address (Envoy does not resolve names for its admin endpoint): %s", c.AdminAddress, host, fix)
	}
	if !addr.IsLoopback() || addr.Zone() != "" {
		return netip.AddrPort{}, fmt.Errorf("xds: BootstrapConfig.AdminAddress %q is not a loopback address: %s", c.AdminAddress, fix)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil || p == 0 {
		return netip.AddrPort{}, fmt.Errorf("xds: BootstrapConfig.AdminAddress %q: the port %q is not 1-65535 (a port chosen at random could not be found by whoever needs the admin endpoint): use %s", c.AdminAddress, port, DefaultAdminAddress)
	}
	return netip.AddrPortFrom(addr.Unmap(), uint16(p)), nil
}

// bootstrapEncoding spells fields as the proto does (snake_case), as Envoy's documentation does;
// Envoy reads either spelling.
var bootstrapEncoding = protojson.MarshalOptions{UseProtoNames: true}

// BootstrapJSON is bs as indented JSON (Envoy reads a bootstrap file ending in .json as JSON).
// protojson's spacing varies by design, so the output is re-indented: the same bootstrap gives
// the same bytes.
func BootstrapJSON(bs *bootstrapv3.Bootstrap) ([]byte, error) {
	raw, err := bootstrapEncoding.Marshal(bs)
	if err != nil {
		return nil, fmt.Errorf("xds: encoding the bootstrap: %w", err)
	}
	var out bytes.Buffer
	if err := json.Indent(&out, raw, "", "  "); err != nil {
		return nil, fmt.Errorf("xds: indenting the bootstrap: %w", err)
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

// BootstrapYAML is bs as YAML, keys sorted (Envoy reads a bootstrap file ending in .yaml as YAML).
func BootstrapYAML(bs *bootstrapv3.Bootstrap) ([]byte, error) {
	raw, err := bootstrapEncoding.Marshal(bs)
	if err != nil {
		return nil, fmt.Errorf("xds: encoding the bootstrap: %w", err)
	}
	out, err := yaml.JSONToYAML(raw)
	if err != nil {
		return nil, fmt.Errorf("xds: converting the bootstrap to YAML: %w", err)
	}
	return out, nil
}
