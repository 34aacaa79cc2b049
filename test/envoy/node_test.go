// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package envoy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"github.com/go-logr/logr"

	"github.com/aether-mesh/aether-operator/internal/accesslog"
	"github.com/aether-mesh/aether-operator/internal/capture/apply/nstest"
	"github.com/aether-mesh/aether-operator/internal/envoytest"
	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/spiffetest"
	"github.com/aether-mesh/aether-operator/internal/testroot"
	"github.com/aether-mesh/aether-operator/internal/xds"
	"github.com/aether-mesh/aether-operator/internal/xdsserver"
)

// node is one node's data plane as a test runs it: the agent's xDS server serving the node's
// snapshot and SDS secrets, a real Envoy started from the bootstrap the agent writes, and a
// network namespace per local pod (at the path the snapshot's listeners name).
type node struct {
	envoy *envoytest.Envoy
	// res is what the server serves, built from mesh (its pods' namespaces filled in).
	res  xds.Resources
	mesh model.Mesh
	// secrets are the SDS secrets served, by name; issued are those secrets.
	secrets []string
	issued  []*tlsv3.Secret
	// netns are the pods' namespaces by their path.
	netns map[string]*nstest.NS
	// ca issued the secrets (a fabric's nodes share one: their hops are mTLS).
	ca *spiffetest.CA
}

// startNode is startNodeWith with the snapshot as Build makes it.
func startNode(t testing.TB, m model.Mesh, delta bool) *node {
	return startNodeWith(t, m, delta, nil)
}

// startNodeWith gives each local pod of m a network namespace of its own (its address on its
// loopback), builds the node's resources, changes them with mutate (a negative control's planted
// break; nil for none), serves them and their secrets from an xdsserver.Server on a unix socket,
// and starts Envoy from xds.Bootstrap's bootstrap for the node (a delta stream with delta).
func startNodeWith(t testing.TB, m model.Mesh, delta bool, mutate func(*xds.Resources)) *node {
	t.Helper()
	testroot.Require(t, "Envoy's listeners in network namespaces")
	pods := map[string]*nstest.NS{}
	for _, p := range m.Pods {
		pods[xds.PodKey(p.Namespace, p.Name)] = nstest.NewNamed(t, "aelive", p.Address)
	}
	return startNodeOn(t, m, nodeOptions{delta: delta, mutate: mutate, pods: pods, xds: serveXDS(t)})
}

// nodeOptions say where a node runs and what it is served.
type nodeOptions struct {
	// delta makes Envoy's ADS stream delta xDS; mutate changes the built resources (nil: none).
	delta  bool
	mutate func(*xds.Resources)
	// pods are the local pods' network namespaces, by xds.PodKey: Build reads their paths.
	pods map[string]*nstest.NS
	// netns is the namespace Envoy runs in, standing for the node's own (nil: the test's).
	netns *nstest.NS
	// xds serves the node; ca issues its secrets (nil: a CA of its own, of m's trust domain).
	xds *xdsServer
	ca  *spiffetest.CA
	// envoyArgs are Envoy's extra command-line arguments (--drain-time-s, say).
	envoyArgs []string
	// maxConnections is the bootstrap's cap on downstream connections (0: the default).
	maxConnections int64
	// cgroupFD, above 0, is the cgroup Envoy starts in (envoytest.Options.CgroupFD): a pod's;
	// unready starts it without waiting until it is ready (envoytest.Options.Unready).
	cgroupFD int
	unready  bool
	// adminWithin is how long Envoy may take to answer its admin endpoint (0: envoytest's default).
	adminWithin time.Duration
}

// xdsServer is the agent's xDS server on a unix socket: one serves every node of a test, each by
// its node ID.
type xdsServer struct {
	*xdsserver.Server
	socket string
	// stop stops the server and reports how it ended on t; once.
	stop func()
}

// serveXDS starts an xDS server; it stops when t ends.
func serveXDS(t testing.TB) *xdsServer {
	t.Helper()
	return serveXDSOn(t, filepath.Join(t.TempDir(), "xds.sock"))
}

// serveXDSOn starts an xDS server on socket; it stops when t ends, or at its stop. Envoy runs
// here as a plain process of the node, not in a pod: the node's own processes are the node's
// Envoy (the agent's --node-envoy-host), each connection's caller read as the agent reads it.
func serveXDSOn(t testing.TB, socket string) *xdsServer {
	t.Helper()
	return serveXDSWith(t, socket, nil)
}

// serveXDSWith is serveXDSOn with the access log served too when accessLog is set.
func serveXDSWith(t testing.TB, socket string, accessLog *accesslog.Server) *xdsServer {
	t.Helper()
	return serveXDSFor(t, socket, xdsserver.NodeEnvoy{Host: true}, accessLog)
}

// serveXDSFor is serveXDSWith serving the callers who.
func serveXDSFor(t testing.TB, socket string, who xdsserver.NodeEnvoy, accessLog *accesslog.Server) *xdsServer {
	t.Helper()
	l, err := xdsserver.Listen(xdsserver.Address{Network: "unix", Path: socket})
	if err != nil {
		t.Fatal(err)
	}
	o := xdsserver.Options{Listener: l, NodeEnvoy: who, Log: logr.Discard()}
	if accessLog != nil {
		o.AccessLog = accessLog
	}
	srv := xdsserver.New(o)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Start(ctx) }()
	stop := sync.OnceFunc(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("xDS server: %v", err)
		}
	})
	t.Cleanup(stop)
	return &xdsServer{Server: srv, socket: socket, stop: stop}
}

// restart stops s and starts a new server on its socket, as an agent that restarts does: it
// starts with nothing published, and the Envoys it served reconnect to it.
func (s *xdsServer) restart(t testing.TB) *xdsServer {
	t.Helper()
	s.stop()
	return serveXDSOn(t, s.socket)
}

// startNodeOn builds m's resources with each local pod in its namespace of o.pods, changes them
// with o.mutate, serves them and their secrets from o.xds, and starts Envoy (in o.netns) from
// xds.Bootstrap's bootstrap for the node.
func startNodeOn(t testing.TB, m model.Mesh, o nodeOptions) *node {
	t.Helper()
	testroot.Require(t, "Envoy's listeners in network namespaces")
	n := &node{netns: map[string]*nstest.NS{}, ca: o.ca}
	m.Pods = slices.Clone(m.Pods)
	for i, p := range m.Pods {
		ns := o.pods[xds.PodKey(p.Namespace, p.Name)]
		if ns == nil {
			t.Fatalf("no network namespace for local pod %s/%s", p.Namespace, p.Name)
		}
		m.Pods[i].NetNS = ns.Path
		n.netns[ns.Path] = ns
	}
	res, err := xds.Build(m)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	if o.mutate != nil {
		o.mutate(&res)
	}
	n.res, n.mesh = res, m

	nodeID := m.Node.Name
	secrets := n.issueSecrets(t, res)
	n.issued = secrets
	if _, err := o.xds.PublishSecrets(nodeID, secrets); err != nil {
		t.Fatalf("PublishSecrets: %v", err)
	}
	if _, err := o.xds.Publish(nodeID, res); err != nil {
		t.Fatalf("Publish: %v", err)
	}

	admin := envoytest.AdminAddress()
	bs, err := xds.Bootstrap(xds.BootstrapConfig{NodeID: nodeID, XDSSocket: o.xds.socket, AdminAddress: admin, Delta: o.delta, MaxConnections: o.maxConnections})
	if err != nil {
		t.Fatal(err)
	}
	bootstrap, err := xds.BootstrapYAML(bs)
	if err != nil {
		t.Fatal(err)
	}
	n.envoy = envoytest.Start(t, bootstrap, admin, envoytest.Options{LogLevel: "warning", Netns: o.netns, Args: o.envoyArgs, CgroupFD: o.cgroupFD, Unready: o.unready, AdminWithin: o.adminWithin})
	return n
}

// issueSecrets issues, from a test CA of the mesh's trust domain, every SDS secret res's TLS
// contexts name: each identity's SVID and the domain's trust bundle.
func (n *node) issueSecrets(t testing.TB, res xds.Resources) []*tlsv3.Secret {
	t.Helper()
	names, err := xds.SecretNames(res.Clusters, res.Listeners)
	if err != nil {
		t.Fatal(err)
	}
	var out []*tlsv3.Secret
	for _, name := range names {
		domain, path, _ := strings.Cut(strings.TrimPrefix(name, "spiffe://"), "/")
		if n.ca == nil {
			if n.ca, err = spiffetest.NewCA(domain); err != nil {
				t.Fatal(err)
			}
		}
		var s *tlsv3.Secret
		if path == "" {
			s, err = xds.BundleSecret(domain, n.ca.BundlePEM)
		} else {
			var cert, key []byte
			if cert, key, err = n.ca.Issue(name); err == nil {
				s, err = xds.SVIDSecret(name, cert, key)
			}
		}
		if err != nil {
			t.Fatalf("secret %s: %v", name, err)
		}
		out = append(out, s)
		n.secrets = append(n.secrets, name)
	}
	return out
}

// want is every resource name the snapshot holds, by the configuration dump's section.
func (n *node) want() map[string][]string {
	w := map[string][]string{"listeners": nil, "clusters": nil, "routes": nil, "endpoints": nil, "secrets": slices.Clone(n.secrets)}
	for _, l := range n.res.Listeners {
		w["listeners"] = append(w["listeners"], l.GetName())
	}
	for _, c := range n.res.Clusters {
		w["clusters"] = append(w["clusters"], c.GetName())
	}
	for _, r := range n.res.Routes {
		w["routes"] = append(w["routes"], r.GetName())
	}
	for _, e := range n.res.Endpoints {
		w["endpoints"] = append(w["endpoints"], e.GetClusterName())
	}
	for _, names := range w {
		slices.Sort(names)
	}
	return w
}

// dump is what the test reads of Envoy's /config_dump: per section, the names held active, those
// still warming, and the errors Envoy recorded for rejected updates.
type dump struct {
	active, warming map[string][]string
	errors          []string
}

func (n *node) configDump() (dump, error) {
	body, err := n.envoy.Get("/config_dump?include_eds")
	if err != nil {
		return dump{}, err
	}
	var raw struct {
		Configs []json.RawMessage `json:"configs"`
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		return dump{}, fmt.Errorf("decoding /config_dump: %w", err)
	}
	d := dump{active: map[string][]string{}, warming: map[string][]string{}}
	for _, c := range raw.Configs {
		var section struct {
			Type      string `json:"@type"`
			Listeners []struct {
				Name    string          `json:"name"`
				Active  json.RawMessage `json:"active_state"`
				Warming json.RawMessage `json:"warming_state"`
				Error   *struct {
					Details string `json:"details"`
				} `json:"error_state"`
			} `json:"dynamic_listeners"`
			ActiveClusters []struct {
				Cluster struct {
					Name string `json:"name"`
				} `json:"cluster"`
				Error *struct {
					Details string `json:"details"`
				} `json:"error_state"`
			} `json:"dynamic_active_clusters"`
			WarmingClusters []struct {
				Cluster struct {
					Name string `json:"name"`
				} `json:"cluster"`
			} `json:"dynamic_warming_clusters"`
			Routes []struct {
				RouteConfig struct {
					Name string `json:"name"`
				} `json:"route_config"`
			} `json:"dynamic_route_configs"`
			Endpoints []struct {
				EndpointConfig struct {
					ClusterName string `json:"cluster_name"`
				} `json:"endpoint_config"`
			} `json:"dynamic_endpoint_configs"`
			ActiveSecrets []struct {
				Name string `json:"name"`
			} `json:"dynamic_active_secrets"`
			WarmingSecrets []struct {
				Name string `json:"name"`
			} `json:"dynamic_warming_secrets"`
		}
		if err := json.Unmarshal(c, &section); err != nil {
			return dump{}, fmt.Errorf("decoding a /config_dump section: %w", err)
		}
		for _, l := range section.Listeners {
			if l.Error != nil {
				d.errors = append(d.errors, fmt.Sprintf("listener %s rejected: %s", l.Name, l.Error.Details))
			}
			if len(l.Active) > 0 {
				d.active["listeners"] = append(d.active["listeners"], l.Name)
			}
			if len(l.Warming) > 0 {
				d.warming["listeners"] = append(d.warming["listeners"], l.Name)
			}
		}
		for _, c := range section.ActiveClusters {
			d.active["clusters"] = append(d.active["clusters"], c.Cluster.Name)
			if c.Error != nil {
				d.errors = append(d.errors, fmt.Sprintf("cluster %s rejected: %s", c.Cluster.Name, c.Error.Details))
			}
		}
		for _, c := range section.WarmingClusters {
			d.warming["clusters"] = append(d.warming["clusters"], c.Cluster.Name)
		}
		for _, r := range section.Routes {
			d.active["routes"] = append(d.active["routes"], r.RouteConfig.Name)
		}
		for _, e := range section.Endpoints {
			d.active["endpoints"] = append(d.active["endpoints"], e.EndpointConfig.ClusterName)
		}
		for _, s := range section.ActiveSecrets {
			d.active["secrets"] = append(d.active["secrets"], s.Name)
		}
		for _, s := range section.WarmingSecrets {
			d.warming["secrets"] = append(d.warming["secrets"], s.Name)
		}
	}
	for _, m := range []map[string][]string{d.active, d.warming} {
		for _, names := range m {
			slices.Sort(names)
		}
	}
	return d, nil
}

// rejectedStat matches the counters Envoy raises when it refuses an update, of any xDS type:
// listener_manager.lds.update_rejected, cluster_manager.cds.update_rejected,
// cluster.<name>.update_rejected (EDS), http.<prefix>.rds.<name>.update_rejected,
// sds.<name>.update_rejected, and their update_failure (a stream that failed).
var rejectedStat = regexp.MustCompile(`\.update_(rejected|failure)$`)

// problems is everything that says Envoy did not take the snapshot: rejection counters above
// zero, the dump's error states, and the log lines in which Envoy says why.
func (n *node) problems(d dump) []string {
	var out []string
	stats, err := n.envoy.Stats()
	if err != nil {
		return []string{err.Error()}
	}
	bad := envoytest.Matching(stats, rejectedStat)
	for _, name := range sortedKeys(bad) {
		if bad[name] > 0 {
			out = append(out, fmt.Sprintf("%s = %d", name, bad[name]))
		}
	}
	out = append(out, d.errors...)
	if len(out) > 0 {
		for line := range strings.SplitSeq(n.envoy.LogTail(400), "\n") {
			if strings.Contains(line, "rejected") || strings.Contains(line, "error") {
				out = append(out, "envoy: "+line)
			}
		}
	}
	return out
}

// waitSettled waits until Envoy holds every resource of the snapshot active and nothing warms,
// or until it has reported a problem; it returns the problems (none when all was taken).
func (n *node) waitSettled(t testing.TB, timeout time.Duration) []string {
	t.Helper()
	want := n.want()
	var problems []string
	n.envoy.WaitFor(t, timeout, "Envoy holds the whole snapshot, or says what it refused", func() (bool, string) {
		d, err := n.configDump()
		if err != nil {
			return false, err.Error()
		}
		if problems = n.problems(d); len(problems) > 0 {
			return true, ""
		}
		var missing []string
		for section, names := range want {
			got := d.active[section]
			if section == "endpoints" {
				// The dump lists the endpoints of clusters that carry their own (static and
				// original-destination ones) too: the snapshot's load assignments must be among them.
				// (Envoy 1.40 lists an EDS cluster's assignment once per priority set it updated.)
				got = slices.Compact(slices.DeleteFunc(slices.Clone(got), func(name string) bool { return !slices.Contains(names, name) }))
			}
			if !slices.Equal(got, names) {
				missing = append(missing, fmt.Sprintf("%s: holds %d of %d (%s)", section, len(got), len(names), diff(names, got)))
			}
		}
		for section, names := range d.warming {
			if len(names) > 0 {
				missing = append(missing, fmt.Sprintf("%s warming: %v", section, names))
			}
		}
		return len(missing) == 0, strings.Join(missing, "; ")
	})
	return problems
}

// requireAccepted fails t unless Envoy took the whole snapshot.
func (n *node) requireAccepted(t testing.TB) {
	t.Helper()
	if problems := n.waitSettled(t, 30*time.Second); len(problems) > 0 {
		t.Fatalf("Envoy did not take the snapshot:\n%s", strings.Join(problems, "\n"))
	}
}

// requireBound fails t unless every address of every listener (its address and its additional
// addresses) is a listening socket in the namespace the listener names, as ss reads it there.
func (n *node) requireBound(t testing.TB) {
	t.Helper()
	for _, l := range n.res.Listeners {
		for _, a := range listenerAddresses(l.GetAddress(), l.GetAdditionalAddresses()) {
			path := a.GetNetworkNamespaceFilepath()
			ns := n.netns[path]
			if ns == nil {
				t.Errorf("listener %s binds %s:%d in %q, which is no pod's namespace", l.GetName(), a.GetAddress(), a.GetPortValue(), path)
				continue
			}
			if !listening(t, ns.Name, a) {
				t.Errorf("listener %s: nothing listens on %s %s:%d in %s (ss: %s)", l.GetName(), a.GetProtocol(), a.GetAddress(), a.GetPortValue(), ns.Name, ss(t, ns.Name, a.GetProtocol()))
			}
		}
	}
}

func listenerAddresses(main *corev3.Address, more []*listenerv3.AdditionalAddress) []*corev3.SocketAddress {
	out := []*corev3.SocketAddress{main.GetSocketAddress()}
	for _, a := range more {
		out = append(out, a.GetAddress().GetSocketAddress())
	}
	return out
}

// listening says whether ss, in namespace ns, lists a listening socket of a's protocol at a's
// address and port ("*" is a dual-stack socket, which holds both wildcards).
func listening(t testing.TB, ns string, a *corev3.SocketAddress) bool {
	host := a.GetAddress()
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	want := host + ":" + strconv.Itoa(int(a.GetPortValue()))
	for line := range strings.SplitSeq(ss(t, ns, a.GetProtocol()), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 4 {
			continue
		}
		local := fields[3]
		if local == want || (local == "*:"+strconv.Itoa(int(a.GetPortValue())) && (host == "0.0.0.0" || host == "[::]")) {
			return true
		}
	}
	return false
}

func ss(t testing.TB, ns string, proto corev3.SocketAddress_Protocol) string {
	flag := "-Hltn"
	if proto == corev3.SocketAddress_UDP {
		flag = "-Hlun"
	}
	out, err := exec.Command("ip", "netns", "exec", ns, "ss", flag).CombinedOutput()
	if err != nil {
		t.Fatalf("ss in %s: %v: %s", ns, err, out)
	}
	return string(out)
}

func diff(want, got []string) string {
	var missing, extra []string
	for _, w := range want {
		if !slices.Contains(got, w) {
			missing = append(missing, w)
		}
	}
	for _, g := range got {
		if !slices.Contains(want, g) {
			extra = append(extra, g)
		}
	}
	return fmt.Sprintf("missing %v, extra %v", missing, extra)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// statSum is the sum of e's counters whose names match re (a stat that ends up in several
// scopes, or one read by pattern).
func statSum(t testing.TB, e *envoytest.Envoy, re *regexp.Regexp) uint64 {
	t.Helper()
	stats, err := e.Stats()
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, v := range envoytest.Matching(stats, re) {
		n += v
	}
	return n
}
