// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xds_test

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"google.golang.org/protobuf/proto"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/authz"
	"github.com/aether-mesh/aether-operator/internal/capture"
	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/resolve"
	"github.com/aether-mesh/aether-operator/internal/xds"
	"github.com/aether-mesh/aether-operator/internal/xds/xdssim"
	"github.com/aether-mesh/aether-operator/internal/xds/xdstest"
	"github.com/aether-mesh/aether-operator/internal/xds/xdswalk"
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
func caughtFailures(failures []string, sh xdswalk.Shape) []string {
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
		shape xdswalk.Shape
	}{
		{"the inspectors never skipped, so a server-first client of a TCP port waits", func(m model.Mesh) (xds.Resources, error) {
			res, err := xds.Build(m)
			for _, l := range res.Listeners {
				for _, f := range l.GetListenerFilters() {
					f.FilterDisabled = nil
				}
			}
			return res, err
		}, xdswalk.ShapeServerFirst},
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
		}, xdswalk.ShapeLate},
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
// what build makes of m, each row with every shape of the traffic corpus (xdswalk's table),
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
	local := map[string]model.LocalPod{}
	for _, p := range m.Pods {
		local[p.Address] = p
	}
	shared := xdswalk.SharedPorts(m)
	failing := map[xdswalk.Shape]int{}
	walked := 0
	for _, client := range m.Pods {
		rules := capture.Build(m, client, capture.Options{})
		if _, err := sim.CaptureRedirects(client.NetNS, rules); err != nil {
			t.Errorf("%s's capture rules: %v", client.Name, err)
		}
		for _, c := range xdswalk.Cases(m, client) {
			conn := c.Conn
			listener, _, err := xdswalk.CapturedBy(sim, client, rules, conn)
			if err != nil {
				walked++
				t.Errorf("%s dials %q (%s): %v", client.Name, c.Row.Address, xdswalk.Describe(conn), err)
				continue
			}
			conn.Listener = listener
			for _, sh := range xdswalk.Corpus {
				walked++
				if err := walkShape(t, sim, walk{Case: c, canonical: conn, shape: sh, local: local, shared: shared}); err != nil {
					failing[sh]++
					t.Errorf("%s dials %q, shape %s (%s): %v", client.Name, c.Row.Address, sh, xdswalk.Describe(xdswalk.ShapeConn(conn, sh, c.Name)), err)
				}
			}
		}
	}
	if len(failing) > 0 {
		var counts []string
		for _, sh := range xdswalk.Corpus {
			if failing[sh] > 0 {
				counts = append(counts, fmt.Sprintf("%s: %d", sh, failing[sh]))
			}
		}
		t.Errorf("shapes that fail: %s", strings.Join(counts, "; "))
	}
	return walked
}

// walk is one connection of the corpus: a case of the walk, the connection its row's canonical
// client makes through the listener its capture reaches, and the shape the walk sends instead.
type walk struct {
	xdswalk.Case
	canonical xdssim.Conn
	shape     xdswalk.Shape
	local     map[string]model.LocalPod
	// shared are the ports where the mesh cannot skip its inspectors (xdswalk.SharedPorts).
	shared map[uint32]bool
}

// walkShape sends w's shape and says how its outcome differs from the table's.
func walkShape(t testing.TB, sim *xdssim.Sim, w walk) error {
	conn := xdswalk.ShapeConn(w.canonical, w.shape, w.Name)
	want := xdswalk.Expected(w.Row, w.shape, uint16(conn.DstPort), w.shared[conn.DstPort])
	out := sim.Dial(conn)
	if err := want.Check(out, w.Row.Result, w.FQDN); err != nil {
		return fmt.Errorf("want %s; %w", want, err)
	}
	if err := fromThePod(out, w.Client); err != nil {
		return err
	}
	if want.Reaches() {
		arrive(t, sim, out, w.Row, want.Protocol(w.Row.Result), conn, w.local, w.Client.Identity)
	}
	return nil
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

// arrive follows a Reaches row to each receiving endpoint on this node: the inbound listener must
// hand it to the application port the row names, in the row's protocol, when the port's
// AccessPolicies admit the caller's call (authz.Decide, the oracle); else it must deny it, 403
// access-denied on HTTP, closed on TCP.
func arrive(t testing.TB, sim *xdssim.Sim, out xdssim.Outcome, row resolve.Dial, protocol xdssim.Protocol, conn xdssim.Conn, local map[string]model.LocalPod, caller string) {
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
			in := sim.ArriveAs(caller, xds.InboundListener(key), target.TLS.SNI, target.TLS.ALPN, conn.HTTP)
			call := authz.Call{Caller: caller}
			if conn.HTTP != nil {
				call.Method, call.Path = cmp.Or(conn.HTTP.Method, "GET"), cmp.Or(conn.HTTP.Path, "/")
			}
			if admitted, _ := authz.Decide(xdstest.Domain, pod.AccessOf(row.Port), call); !admitted {
				if err := deniedAsDecided(in, protocol); err != nil {
					t.Errorf("%q reaches pod %s, whose port %d's AccessPolicies deny %+v: %v", row.Address, key, row.Port, call, err)
				}
				continue
			}
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

// deniedAsDecided says how in differs from a denial: on HTTP the RBAC filter's 403 with
// x-aether-error: access-denied, on TCP the handshake refusing the caller.
func deniedAsDecided(in xdssim.Outcome, protocol xdssim.Protocol) error {
	if protocol == xdssim.TCP {
		// Refused in the handshake, before the application is connected (authz.go).
		if !errors.Is(in.Err, xdssim.ErrPeerRefused) || in.Verdict != xdssim.Closed {
			return fmt.Errorf("the inbound gives %s, want the handshake to refuse the caller", in)
		}
		return nil
	}
	if !errors.Is(in.Err, xdssim.ErrDenied) {
		return fmt.Errorf("the inbound gives %s, want the RBAC filter's denial", in)
	}
	if in.Verdict != xdssim.Answered || in.Response.Status != 403 || in.Response.Header(resolve.ErrorHeader) != authz.DeniedError {
		return fmt.Errorf("the inbound gives %s (%+v), want 403 with %s: %s", in, in.Response, resolve.ErrorHeader, authz.DeniedError)
	}
	return nil
}
