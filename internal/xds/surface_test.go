// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xds_test

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
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
// hand the connection to the application's port the row names (the SNI rule, both ends).
//
// Rows are walked where the pod's capture mode captures them: every row in surface and all mode;
// in scoped mode only what is dialled on the mesh ports 18081 and 18082 (nothing else is
// redirected to the proxy, DESIGN section 8). Services a Gateway API route attaches to are left
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
			if len(fake.failures) == 0 {
				t.Fatal("the walk passed; it must fail")
			}
			t.Logf("caught (%d failures), e.g. %s", len(fake.failures), fake.failures[0])
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
// what build makes of m, reporting disagreements on t, and returns how many connections it walked.
func walkSurfaces(t testing.TB, m model.Mesh, build func(model.Mesh) (xds.Resources, error)) int {
	res, err := build(m)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	sim := xdssim.New(res)
	if err := sim.Check(); err != nil {
		t.Fatalf("Envoy would reject the configuration: %v", err)
	}
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
	walked := 0
	for _, client := range m.Pods {
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
					want := template.For(fqdn).Result
					for _, conn := range connections(row, name, svc.VIP, set, client.Capture) {
						conn.Listener = xds.CaptureListener(xds.PodKey(client.Namespace, client.Name))
						walked++
						out := sim.Dial(conn)
						if err := xdssim.Agrees(out, want, fqdn); err != nil {
							t.Errorf("%s dials %q (%s): %v", client.Name, row.Address, describe(conn), err)
							continue
						}
						if err := fromThePod(out, client); err != nil {
							t.Errorf("%s dials %q (%s): %v", client.Name, row.Address, describe(conn), err)
						}
						if row.Outcome == resolve.Reaches {
							arrive(t, sim, out, row, conn, local)
						}
					}
				}
			}
		}
	}
	return walked
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
func arrive(t testing.TB, sim *xdssim.Sim, out xdssim.Outcome, row resolve.Dial, conn xdssim.Conn, local map[string]model.LocalPod) {
	for _, target := range out.Targets {
		for _, ep := range target.Receiving() {
			pod, ok := local[ep.Address]
			if !ok || target.TLS == nil {
				continue
			}
			key := xds.PodKey(pod.Namespace, pod.Name)
			in := sim.Arrive(xds.InboundListener(key), target.TLS.SNI, target.TLS.ALPN, conn.HTTP)
			want := xds.AppCluster(key, row.Port)
			if in.Verdict != xdssim.Forwarded || len(in.Targets) != 1 || in.Targets[0].Cluster != want {
				t.Errorf("%q reaches pod %s with SNI %q: the inbound gives %s; want %s", row.Address, key, target.TLS.SNI, in, want)
			}
			if wantProtocol := protocolOf(row.Protocol); in.Protocol != wantProtocol {
				t.Errorf("%q reaches pod %s as %s; want %s", row.Address, key, in.Protocol, wantProtocol)
			}
		}
	}
}

func protocolOf(p meshv1alpha1.Protocol) xdssim.Protocol {
	if p.IsHTTP() {
		return xdssim.HTTP
	}
	return xdssim.TCP
}

func describe(c xdssim.Conn) string {
	s := fmt.Sprintf("%s:%d", c.DstIP, c.DstPort)
	if c.TLS {
		s += " TLS sni=" + c.SNI
	}
	if c.HTTP != nil {
		s += " HTTP Host=" + c.HTTP.Host
	}
	return s
}
