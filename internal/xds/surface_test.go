// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xds_test

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"google.golang.org/protobuf/proto"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/capture"
	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/resolve"
	"github.com/aether-mesh/aether-operator/internal/xds"
	"github.com/aether-mesh/aether-operator/internal/xds/xdssim"
	"github.com/aether-mesh/aether-operator/internal/xds/xdstest"
)

// TestDialSurfaceLandsWhereStatusSays is the test that keeps status and data plane from ever
// disagreeing (issue 12, Deliver 5): for every golden scenario, every local pod as the client,
// every service, every name of it that holds from the client's namespace and every row of its dial surface (resolve.DialSurface, what
// MeshService.status.dialSurface says), a connection simulated through the generated listeners,
// routes, clusters and load assignments (xdssim, which follows Envoy's matching order) lands on
// exactly the (port, protocol) resolve says, or on the refusal or 421 it says. A Reaches row is
// followed to the destination when the destination pod is on this node: its inbound listener must
// hand the connection to the application's port the row names (the SNI rule, both ends). Each row
// is sent as every shape of the traffic corpus (corpus_test.go: HTTP/1.1, HTTP/1.0, h2c, TLS with
// and without SNI and ALPN, WebSocket, a late first byte, a server-first client), and what each
// shape should get there is the corpus' table, not resolve's.
//
// Rows are walked where the pod's capture mode captures them: every row in surface and all mode;
// in scoped mode only what is dialled on the mesh ports 18081 and 18082 (nothing else is
// redirected to the proxy, DESIGN section 8). Each client's capture rules (capture.Build) are read
// too: every family they redirect must reach a listener bound in the client's network namespace
// (xdssim.CaptureRedirects), and each connection goes to the listener its redirect reaches, by
// the family of the address dialled (IPv6 in the dual-stack scenario); a Reaches row arrives at
// the listener bound at the endpoint's address in the destination pod's namespace. Services a Gateway API route attaches to are left
// to the route tests: a route sends their traffic elsewhere on purpose.
func TestDialSurfaceLandsWhereStatusSays(t *testing.T) {
	scenarios := xdstest.All()
	for _, name := range slices.Sorted(maps.Keys(scenarios)) {
		t.Run(name, func(t *testing.T) {
			walked := walkSurfaces(t, scenarios[name], xds.Build)
			if walked == 0 {
				t.Fatal("no row was walked: the test proves nothing")
			}
			t.Logf("%d connections walked", walked)
		})
	}
}

// The negative controls: a builder or a rule that disagrees with the other must be caught.
func TestDialSurfaceWalkCatchesDisagreement(t *testing.T) {
	m := xdstest.All()["mixed-http-primary"]
	for _, tc := range []struct {
		name  string
		build func(model.Mesh) (xds.Resources, error)
	}{
		{"the TCP chains given the HTTP connection manager", func(m model.Mesh) (xds.Resources, error) {
			res, err := xds.Build(m)
			swapTCPClusters(res)
			return res, err
		}},
		{"the 421 answers dropped from the route configurations", func(m model.Mesh) (xds.Resources, error) {
			res, err := xds.Build(m)
			for _, rc := range res.Routes {
				for _, vh := range rc.GetVirtualHosts() {
					for _, r := range vh.GetRoutes() {
						if dr := r.GetDirectResponse(); dr != nil {
							dr.Status = 404
						}
					}
				}
			}
			return res, err
		}},
		{"one cluster that binds in the node's namespace", func(m model.Mesh) (xds.Resources, error) {
			res, err := xds.Build(m)
			for _, c := range res.Clusters {
				if strings.HasPrefix(c.GetName(), "tcp:payments") {
					c.UpstreamBindConfig = nil
					break
				}
			}
			return res, err
		}},
		{"the capture chains without the filter that names the pod's namespace", func(m model.Mesh) (xds.Resources, error) {
			res, err := xds.Build(m)
			for _, l := range res.Listeners {
				for _, fc := range append(l.GetFilterChains(), l.GetDefaultFilterChain()) {
					if f := fc.GetFilters(); len(f) > 1 && f[0].GetName() == xds.SetFilterStateFilter {
						fc.Filters = f[1:]
					}
				}
			}
			return res, err
		}},
		{"a service's load assignment emptied", func(m model.Mesh) (xds.Resources, error) {
			res, err := xds.Build(m)
			for _, cla := range res.Endpoints {
				cla.Endpoints = nil
			}
			return res, err
		}},
		{"the status promising port 80 to a portless Host", func(m model.Mesh) (xds.Resources, error) {
			// A rule that disagrees: declare 80 in the model the builder reads, not in the one
			// resolve reads (walkSurfaces reads the original).
			changed := m
			changed.Services = slices.Clone(m.Services)
			for i, s := range changed.Services {
				if s.Name == "payments" {
					s.Ports = append([]model.Port{{Number: 80, Protocol: meshv1alpha1.ProtocolHTTP, Pairs: s.Ports[0].Pairs}}, s.Ports...)
					changed.Services[i] = s
				}
			}
			return xds.Build(changed)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := &recorder{TB: t}
			fake.walk(m, tc.build)
			caught := caughtFailures(fake.failures, "")
			if len(caught) == 0 {
				t.Fatalf("the walk passed (failures: %d, none of them this control's); it must fail", len(fake.failures))
			}
			t.Logf("caught (%d failures), e.g. %s", len(caught), caught[0])
		})
	}
}

// caughtFailures are the failures a negative control caused, but the per-shape summary; of
// shape sh only, when set.
func caughtFailures(failures []string, sh shape) []string {
	var out []string
	for _, f := range failures {
		switch {
		case strings.HasPrefix(f, "shapes that fail: "):
		case sh != "" && !strings.Contains(f, ", shape "+string(sh)+" ("):
		default:
			out = append(out, f)
		}
	}
	return out
}

// The negative controls of the corpus' slow shapes: a builder that inspects every port holds a
// server-first client of a TCP port; one whose HTTP chains need http_inspector's verdict resets a
// late HTTP client. Each must fail the walk on its own shape.
func TestDialSurfaceWalkCatchesSlowClients(t *testing.T) {
	m := xdstest.All()["mixed-http-primary"]
	for _, tc := range []struct {
		name  string
		build func(model.Mesh) (xds.Resources, error)
		shape shape
	}{
		{"the inspectors never skipped, so a server-first client of a TCP port waits", func(m model.Mesh) (xds.Resources, error) {
			res, err := xds.Build(m)
			for _, l := range res.Listeners {
				for _, f := range l.GetListenerFilters() {
					f.FilterDisabled = nil
				}
			}
			return res, err
		}, shapeServerFirst},
		{"the HTTP ports' chains asking for http_inspector's verdict, which a late client never gets", func(m model.Mesh) (xds.Resources, error) {
			res, err := xds.Build(m)
			for _, l := range res.Listeners {
				for _, fc := range l.GetFilterChains() {
					if m := fc.GetFilterChainMatch(); strings.HasPrefix(fc.GetName(), "cap_http_") && m.GetTransportProtocol() == "raw_buffer" {
						m.ApplicationProtocols = []string{"http/1.1", "h2c"}
					}
				}
			}
			return res, err
		}, shapeLate},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := &recorder{TB: t}
			fake.walk(m, tc.build)
			caught := caughtFailures(fake.failures, tc.shape)
			if len(caught) == 0 {
				t.Fatalf("no %s connection failed the walk (failures: %d); it must", tc.shape, len(fake.failures))
			}
			t.Logf("caught (%d failures), e.g. %s", len(caught), caught[0])
		})
	}
}

// The reachability checks' negative controls, on the dual-stack mesh: each capture listener on
// 127.0.0.1:18001 alone (its additional addresses stripped) while the pods' capture rules redirect
// IPv6 to [::1]:18001, so every pod's rules and every IPv6 dial are refused; payments-0's inbound
// listener on 0.0.0.0 alone, so the peers' dials of its IPv6 address find nothing; and the
// clusters' upstream sockets bound to 0.0.0.0 alone, so no connection to an IPv6 endpoint leaves.
func TestDialSurfaceWalkCatchesAnUnboundFamily(t *testing.T) {
	m := xdstest.All()["dual-stack-mesh"]
	for _, tc := range []struct {
		name     string
		breakIt  func(m model.Mesh, res xds.Resources)
		everyOne string // what every failure names
	}{
		{"the capture listeners on 127.0.0.1 alone", func(m model.Mesh, res xds.Resources) {
			for _, l := range res.Listeners {
				for _, p := range m.Pods {
					if l.GetName() == xds.CaptureListener(xds.PodKey(p.Namespace, p.Name)) {
						l.AdditionalAddresses = nil
					}
				}
			}
		}, "where no listener is bound (listener \"capture_"},
		{"an IPv6 pod's inbound listener on 0.0.0.0 alone", func(_ model.Mesh, res xds.Resources) {
			for _, l := range res.Listeners {
				if l.GetName() == xds.InboundListener("shop/payments-0") {
					l.Address.GetSocketAddress().Address, l.Address.GetSocketAddress().Ipv4Compat = "0.0.0.0", false
				}
			}
		}, "reaches pod shop/payments-0 at [fd00:10:244:1::10]:18008: the listener bound there in its namespace is \"\""},
		{"the upstream sockets bound to 0.0.0.0 alone", func(_ model.Mesh, res xds.Resources) {
			for _, c := range res.Clusters {
				if bind := c.GetUpstreamBindConfig(); bind != nil {
					c.UpstreamBindConfig = proto.Clone(bind).(*corev3.BindConfig)
					c.UpstreamBindConfig.ExtraSourceAddresses = nil
				}
			}
		}, xdssim.ErrSourceFamily.Error()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := &recorder{TB: t}
			fake.walk(m, func(m model.Mesh) (xds.Resources, error) {
				res, err := xds.Build(m)
				tc.breakIt(m, res)
				return res, err
			})
			caught := caughtFailures(fake.failures, "")
			named := 0
			for _, f := range caught {
				if strings.Contains(f, tc.everyOne) {
					named++
				}
			}
			if named == 0 || named != len(caught) {
				t.Fatalf("%d of %d failures name %q; want every one, and some: %v", named, len(caught), tc.everyOne, caught)
			}
			t.Logf("caught (%d failures), e.g. %s", named, caught[0])
		})
	}
}

// recorder is a testing.TB that keeps the failures a negative control expects.
type recorder struct {
	testing.TB
	failures []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.failures = append(r.failures, fmt.Sprintf(format, args...))
}

// Fatalf records the failure and ends the controlled walk (walk recovers), not the control's test.
func (r *recorder) Fatalf(format string, args ...any) {
	r.failures = append(r.failures, fmt.Sprintf(format, args...))
	panic(errWalkEnded)
}

var errWalkEnded = errors.New("the controlled walk ended with a fatal failure")

// walk runs walkSurfaces on the recorder, ending where a Fatalf ends it.
func (r *recorder) walk(m model.Mesh, build func(model.Mesh) (xds.Resources, error)) {
	defer func() {
		if v := recover(); v != nil && v != errWalkEnded {
			panic(v)
		}
	}()
	walkSurfaces(r, m, build)
}

// swapTCPClusters gives each capture listener's per-port TCP chains the filters of its first
// other TCP chain of another membership, or of the HCM chain when there is none.
func swapTCPClusters(res xds.Resources) {
	for _, l := range res.Listeners {
		var http []*listenerv3.Filter
		for _, fc := range l.GetFilterChains() {
			if fc.GetName() == xds.CaptureHTTPChain {
				http = fc.GetFilters()
			}
		}
		for _, fc := range l.GetFilterChains() {
			if strings.HasPrefix(fc.GetName(), "cap_tcp_") && fc.GetName() != xds.CaptureBlackholeChain && http != nil {
				fc.Filters = http
			}
		}
	}
}

// walkSurfaces walks every surface row of m (see TestDialSurfaceLandsWhereStatusSays) through
// what build makes of m, each row with every shape of the traffic corpus (corpus.go's table),
// reporting what differs on t, and returns how many connections it walked. A failure names the
// client, the row, the shape, what the table wants and what the data plane does.
func walkSurfaces(t testing.TB, m model.Mesh, build func(model.Mesh) (xds.Resources, error)) int {
	res, err := build(m)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	sim := xdssim.New(res)
	if err := sim.Check(); err != nil {
		t.Fatalf("Envoy would reject the configuration: %v", err)
	}
	// A service the node does not carry is fetched on demand (model.UpstreamsDeclared) and then
	// walks as a carried one.
	sim.FetchOnDemand(onDemandFetcher(t, m, build))
	routed := map[string]bool{}
	for _, r := range m.Routes {
		for _, p := range r.Parents {
			routed[p.Namespace+"/"+p.Name] = true
		}
	}
	local := map[string]model.LocalPod{}
	for _, p := range m.Pods {
		local[p.Address] = p
	}
	shared := sharedPorts(m)
	failing := map[shape]int{}
	walked := 0
	for _, client := range m.Pods {
		rules := capture.Build(m, client, capture.Options{})
		if _, err := sim.CaptureRedirects(client.NetNS, rules); err != nil {
			t.Errorf("%s's capture rules: %v", client.Name, err)
		}
		for _, svc := range m.Services {
			if svc.VIP == "" || svc.Identity == "" || routed[svc.Namespace+"/"+svc.Name] {
				continue
			}
			set := svc.PortSet()
			fqdn := xds.FQDN(svc.Name, svc.Namespace, m.Domain)
			// The bare name too, from the service's own namespace (resolve.NamesFrom).
			for _, name := range resolve.NamesFrom(svc.Name, svc.Namespace, client.Namespace, m.Domain) {
				for _, template := range resolve.DialSurface(set, m.Issuer) {
					row := template.For(name)
					// The 421 bodies name the mesh name's spellings, whichever name the client
					// used (one answer per authority keeps the route configuration small).
					row.Result = template.For(fqdn).Result
					for _, conn := range connections(row, name, svc.VIP, set, client.Capture) {
						listener, err := capturedBy(sim, client, rules, conn)
						if err != nil {
							walked++
							t.Errorf("%s dials %q (%s): %v", client.Name, row.Address, describe(conn), err)
							continue
						}
						conn.Listener = listener
						for _, sh := range corpus {
							walked++
							if err := walkShape(t, sim, walk{row: row, canonical: conn, shape: sh, name: name, fqdn: fqdn,
								client: client, local: local, shared: shared}); err != nil {
								failing[sh]++
								t.Errorf("%s dials %q, shape %s (%s): %v", client.Name, row.Address, sh, describe(shapeConn(conn, sh, name)), err)
							}
						}
					}
				}
			}
		}
	}
	if len(failing) > 0 {
		var counts []string
		for _, sh := range corpus {
			if failing[sh] > 0 {
				counts = append(counts, fmt.Sprintf("%s: %d", sh, failing[sh]))
			}
		}
		t.Errorf("shapes that fail: %s", strings.Join(counts, "; "))
	}
	return walked
}

// walk is one connection of the corpus: a surface row, the connection that row's canonical
// client makes, and the shape the walk sends instead.
type walk struct {
	row       resolve.Dial
	canonical xdssim.Conn
	shape     shape
	// name is the name the row spells; fqdn the service's mesh name.
	name, fqdn string
	client     model.LocalPod
	local      map[string]model.LocalPod
	// shared are the ports where the mesh cannot skip its inspectors (sharedPorts).
	shared map[uint32]bool
}

// walkShape sends w's shape and says how its outcome differs from the table's.
func walkShape(t testing.TB, sim *xdssim.Sim, w walk) error {
	conn := shapeConn(w.canonical, w.shape, w.name)
	want := expected(w.row, w.shape, uint16(conn.DstPort), w.shared[conn.DstPort])
	out := sim.Dial(conn)
	if err := want.check(out, w.row.Result, w.fqdn); err != nil {
		return fmt.Errorf("want %s; %w", want, err)
	}
	if err := fromThePod(out, w.client); err != nil {
		return err
	}
	if want.reaches() {
		arrive(t, sim, out, w.row, want.protocol(w.row.Result), conn, w.local)
	}
	return nil
}

// capturedBy is the listener a connection conn of client's reaches: the one the client's capture
// rules redirect it to, bound in the client's network namespace at the loopback address of the
// connection's family, which must be client's capture listener. A connection the rules leave
// alone (a row connections() walks that the mode does not redirect, such as a port the service
// does not declare) is walked through the capture listener as ever: its outcome (refused) is
// the same whether the VIP or the passthrough refuses it.
func capturedBy(sim *xdssim.Sim, client model.LocalPod, rules capture.Ruleset, conn xdssim.Conn) (string, error) {
	own := xds.CaptureListener(xds.PodKey(client.Namespace, client.Name))
	dst, err := netip.ParseAddr(conn.DstIP)
	if err != nil {
		return "", err
	}
	listener, err := sim.Capture(client.NetNS, rules, netip.AddrPortFrom(dst, uint16(conn.DstPort)))
	switch {
	case err != nil:
		return "", err
	case listener == "":
		return own, nil
	case listener != own:
		return "", fmt.Errorf("the capture rules redirect it to listener %q, not the pod's capture listener %q", listener, own)
	}
	return listener, nil
}

// fromThePod says whether every upstream connection out opens leaves from client's network
// namespace, marked as the proxy's (so its capture rules leave it alone): its source is the pod,
// never the node (DESIGN section 8, "Trust").
func fromThePod(out xdssim.Outcome, client model.LocalPod) error {
	for _, t := range out.Targets {
		if t.Weight == 0 || t.Err != nil {
			continue
		}
		if t.Netns != client.NetNS || t.Mark != model.ProxySocketMark {
			return fmt.Errorf("cluster %q connects from namespace %q with mark %#x; want the pod's %q, mark %#x",
				t.Cluster, t.Netns, t.Mark, client.NetNS, model.ProxySocketMark)
		}
	}
	return nil
}

// connections are the connections a client makes for one surface row, to the service's VIP (every
// name resolves to it); none for the rows its capture mode does not redirect to the proxy, and
// none for <name>:18081 itself (HostDecides: its Host rows are walked).
func connections(row resolve.Dial, name, vip string, set interface {
	Lookup(int32) (meshv1alpha1.Protocol, bool)
}, mode model.CaptureMode) []xdssim.Conn {
	const hostRow = resolve.HostRowPrefix
	scoped := mode == model.CaptureScoped
	http := func(port int32, host string) xdssim.Conn {
		return xdssim.Conn{DstIP: vip, DstPort: uint32(port), HTTP: &xdssim.Request{Host: host}}
	}
	bytes := func(port int32) xdssim.Conn { return xdssim.Conn{DstIP: vip, DstPort: uint32(port)} }
	undeclared := undeclaredPort(set)
	addr := row.Address
	switch {
	case row.Outcome == resolve.HostDecides:
		return nil
	case strings.HasPrefix(addr, hostRow):
		host := strings.TrimPrefix(addr, hostRow)
		if strings.HasSuffix(host, ":"+resolve.AnyOtherPort) {
			host = strings.TrimSuffix(host, resolve.AnyOtherPort) + strconv.Itoa(int(undeclared))
		}
		return []xdssim.Conn{http(meshv1alpha1.MeshHTTPPort, host)}
	case addr == "http://"+name+"/":
		if scoped {
			return nil
		}
		return []xdssim.Conn{http(resolve.HTTPPort, name)}
	case addr == "https://"+name+"/":
		if scoped {
			return nil
		}
		return []xdssim.Conn{{DstIP: vip, DstPort: uint32(resolve.HTTPSPort), TLS: true, SNI: name, ALPN: []string{"h2", "http/1.1"}}}
	case addr == name+":"+resolve.AnyOtherPort:
		if scoped {
			return nil
		}
		return []xdssim.Conn{bytes(undeclared)}
	}
	port, err := strconv.Atoi(strings.TrimPrefix(addr, name+":"))
	if err != nil {
		panic(fmt.Sprintf("surface row %q is of no shape this walk knows", addr))
	}
	if scoped && int32(port) != meshv1alpha1.MeshTCPPort {
		return nil
	}
	if p, ok := set.Lookup(int32(port)); ok && p.IsHTTP() {
		// <name>:<p>, p HTTP: an HTTP client sends Host name:p.
		return []xdssim.Conn{http(int32(port), name+":"+strconv.Itoa(port))}
	}
	return []xdssim.Conn{bytes(int32(port))}
}

// undeclaredPort is a port the service does not declare and the mesh does not own.
func undeclaredPort(set interface {
	Lookup(int32) (meshv1alpha1.Protocol, bool)
}) int32 {
	for _, p := range []int32{7, 1234, 65000, 65001} {
		if _, ok := set.Lookup(p); !ok {
			return p
		}
	}
	panic("every candidate port is declared")
}

// arrive follows a Reaches row to each receiving endpoint on this node: the inbound listener must
// hand it to the application port the row names, in the row's protocol.
func arrive(t testing.TB, sim *xdssim.Sim, out xdssim.Outcome, row resolve.Dial, protocol xdssim.Protocol, conn xdssim.Conn, local map[string]model.LocalPod) {
	for _, target := range out.Targets {
		for _, ep := range target.Receiving() {
			pod, ok := local[ep.Address]
			if !ok || target.TLS == nil {
				continue
			}
			key := xds.PodKey(pod.Namespace, pod.Name)
			// The peer dials the endpoint's address, in the destination pod's namespace.
			at := netip.AddrPortFrom(netip.MustParseAddr(ep.Address), uint16(ep.Port))
			if inbound, ok := sim.ListenerAt(pod.NetNS, at); !ok || inbound != xds.InboundListener(key) {
				t.Errorf("%q reaches pod %s at %s: the listener bound there in its namespace is %q; want %q",
					row.Address, key, at, inbound, xds.InboundListener(key))
				continue
			}
			in := sim.Arrive(xds.InboundListener(key), target.TLS.SNI, target.TLS.ALPN, conn.HTTP)
			want := xds.AppCluster(key, row.Port)
			if in.Verdict != xdssim.Forwarded || len(in.Targets) != 1 || in.Targets[0].Cluster != want {
				t.Errorf("%q reaches pod %s with SNI %q: the inbound gives %s; want %s", row.Address, key, target.TLS.SNI, in, want)
			}
			if in.Protocol != protocol {
				t.Errorf("%q reaches pod %s as %s; want %s", row.Address, key, in.Protocol, protocol)
			}
		}
	}
}

func describe(c xdssim.Conn) string {
	s := net.JoinHostPort(c.DstIP, strconv.Itoa(int(c.DstPort)))
	if c.TLS {
		s += fmt.Sprintf(" TLS sni=%q alpn=%v", c.SNI, c.ALPN)
	}
	if c.HTTP != nil {
		s += " HTTP Host=" + c.HTTP.Host
		if c.HTTP.HTTP2 {
			s += " (h2c)"
		}
	}
	if c.FirstBytesAfter > 0 {
		s += fmt.Sprintf(", first bytes after %s", c.FirstBytesAfter)
	}
	if c.ServerFirst {
		s += ", server-first"
	}
	return s
}
