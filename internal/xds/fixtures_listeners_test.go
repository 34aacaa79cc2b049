// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xds_test

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/xds"
)

// Fixtures of the listener and route tests (prefixed fx: the package's other tests have their own).

const fxDomain = "aether.internal"

// fxCreated is when every fixture endpoint was created.
var fxCreated = metav1.NewTime(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))

// fxEndpoint is one endpoint of a fixture service.
type fxEndpoint struct {
	name    string
	address string
	health  meshv1alpha1.Health
}

// fxServiceWith builds service name in ns through model.BuildService (the real path), from
// endpoints that all declare primary and ports ("8080/HTTP", "9000/TCP").
func fxServiceWith(t testing.TB, ns, name, vip string, primary int32, ports []string, eps ...fxEndpoint) model.Service {
	t.Helper()
	var declared []meshv1alpha1.PortProtocol
	for _, p := range ports {
		number, protocol, ok := strings.Cut(p, "/")
		n, err := strconv.ParseInt(number, 10, 32)
		if !ok || err != nil {
			t.Fatalf("port %q: want <port>/<protocol>", p)
		}
		declared = append(declared, meshv1alpha1.PortProtocol{Port: int32(n), Protocol: meshv1alpha1.Protocol(protocol)})
	}
	slices.SortFunc(declared, func(a, b meshv1alpha1.PortProtocol) int { return cmp.Compare(a.Port, b.Port) })
	in := model.Input{Namespace: ns, Name: name, Identity: fxIdentity(ns, name), VIP: vip}
	for _, ep := range eps {
		me := meshv1alpha1.MeshEndpoint{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ep.name, CreationTimestamp: fxCreated}}
		me.Spec = meshv1alpha1.MeshEndpointSpec{ServiceName: name, PodName: ep.name, PodUID: "uid-" + ep.name, NodeName: "node-a",
			Address: ep.address, PrimaryPort: primary, Ports: declared, Weight: 1024}
		me.Status.Health = ep.health
		in.Endpoints = append(in.Endpoints, me)
	}
	svc := model.BuildService(in)
	if err := svc.Validate(); err != nil {
		t.Fatalf("fixture service %s/%s: %v", ns, name, err)
	}
	return svc
}

// fxService is a service of one healthy endpoint.
func fxService(t testing.TB, ns, name, vip string, primary int32, ports ...string) model.Service {
	t.Helper()
	return fxServiceWith(t, ns, name, vip, primary, ports, fxEndpoint{name + "-0", "10.244.0.10", meshv1alpha1.HealthHealthy})
}

func fxIdentity(ns, sa string) string { return "spiffe://" + fxDomain + "/ns/" + ns + "/sa/" + sa }

// fxPod is a local pod of service (its identity), serving primary and ports.
func fxPod(t testing.TB, ns, name, service string, capture model.CaptureMode, primary int32, ports ...string) model.LocalPod {
	t.Helper()
	p := model.LocalPod{Namespace: ns, Name: name, UID: "uid-" + name, Service: service, Address: "10.244.0.20",
		Primary: primary, NetNS: "/var/run/netns/cni-" + name, Identity: fxIdentity(ns, service), Capture: capture}
	for _, s := range ports {
		number, protocol, _ := strings.Cut(s, "/")
		n, err := strconv.ParseInt(number, 10, 32)
		if err != nil {
			t.Fatalf("port %q: want <port>/<protocol>", s)
		}
		p.Ports = append(p.Ports, meshv1alpha1.PortProtocol{Port: int32(n), Protocol: meshv1alpha1.Protocol(protocol)})
	}
	return p
}

// fxClient is the usual local pod: a pure-HTTP client "web" in "shop", capture mode surface.
func fxClient(t testing.TB) model.LocalPod {
	return fxPod(t, "shop", "web-0", "web", model.CaptureSurface, 8080, "8080/HTTP")
}

func fxMesh(pods []model.LocalPod, services ...model.Service) model.Mesh {
	return model.Mesh{Domain: fxDomain, Node: model.Node{Name: "node-a"}, Services: services, Pods: pods}
}

// fxBuild builds m, fails the test on an error, and validates every message it returns, the
// content of every Any included (the generated validators do not descend into an Any).
func fxBuild(t testing.TB, m model.Mesh) xds.Resources {
	t.Helper()
	res, err := xds.Build(m)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	for _, l := range res.Listeners {
		fxValidateDeep(t, "listener "+l.GetName(), l)
	}
	for _, rc := range res.Routes {
		fxValidateDeep(t, "route configuration "+rc.GetName(), rc)
	}
	return res
}

// fxValidateDeep runs ValidateAll on m and on the message inside every Any under it.
func fxValidateDeep(t testing.TB, what string, m proto.Message) {
	t.Helper()
	if v, ok := m.(interface{ ValidateAll() error }); ok {
		if err := v.ValidateAll(); err != nil {
			t.Errorf("%s is invalid: %v", what, err)
		}
	}
	fxEachAny(m.ProtoReflect(), func(a *anypb.Any) {
		inner, err := a.UnmarshalNew()
		if err != nil {
			t.Errorf("%s: unpacking %s: %v", what, a.GetTypeUrl(), err)
			return
		}
		fxValidateDeep(t, what+" > "+a.GetTypeUrl(), inner)
	})
}

// fxEachAny calls f on every Any directly or indirectly under m (not inside another Any: f
// descends into those itself).
func fxEachAny(m protoreflect.Message, f func(*anypb.Any)) {
	visit := func(v protoreflect.Message) {
		if a, ok := v.Interface().(*anypb.Any); ok {
			f(a)
			return
		}
		fxEachAny(v, f)
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList() && fd.Message() != nil:
			for i := range v.List().Len() {
				visit(v.List().Get(i).Message())
			}
		case fd.IsMap() && fd.MapValue().Message() != nil:
			v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
				visit(mv.Message())
				return true
			})
		case !fd.IsList() && !fd.IsMap() && fd.Message() != nil:
			visit(v.Message())
		}
		return true
	})
}

func fxListener(t testing.TB, res xds.Resources, name string) *listenerv3.Listener {
	t.Helper()
	return fxNamed(t, "listener", res.Listeners, name)
}

func fxRoutes(t testing.TB, res xds.Resources, name string) *routev3.RouteConfiguration {
	t.Helper()
	return fxNamed(t, "route configuration", res.Routes, name)
}

// fxNamed is the resource of ms named name; kind names what ms are when there is none.
func fxNamed[M interface{ GetName() string }](t testing.TB, kind string, ms []M, name string) M {
	t.Helper()
	i := slices.IndexFunc(ms, func(m M) bool { return m.GetName() == name })
	if i < 0 {
		t.Fatalf("no %s %q among %v", kind, name, fxNames(ms))
	}
	return ms[i]
}

func fxNames[M interface{ GetName() string }](ms []M) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.GetName()
	}
	return out
}

// fxUnpack unpacks a into a new T, failing the test otherwise.
func fxUnpack[T proto.Message](t testing.TB, a *anypb.Any) T {
	t.Helper()
	m, err := a.UnmarshalNew()
	if err != nil {
		t.Fatalf("unpacking %s: %v", a.GetTypeUrl(), err)
	}
	typed, ok := m.(T)
	if !ok {
		var zero T
		t.Fatalf("%s is a %T, want %T", a.GetTypeUrl(), m, zero)
	}
	return typed
}

// fxConn is a connection as the capture listener's filter chain match sees it.
type fxConn struct {
	ip        string
	port      int32
	sni       string
	transport string   // "raw_buffer" unless tls_inspector saw TLS ("tls")
	apps      []string // what http_inspector (cleartext) or the TLS ALPN reports
}

// Connections by what their first bytes are.
func fxHTTP(ip string, port int32) fxConn {
	return fxConn{ip: ip, port: port, transport: "raw_buffer", apps: []string{"http/1.1"}}
}
func fxRaw(ip string, port int32) fxConn { return fxConn{ip: ip, port: port, transport: "raw_buffer"} }
func fxTLS(ip string, port int32) fxConn {
	return fxConn{ip: ip, port: port, transport: "tls", apps: []string{"h2", "http/1.1"}}
}

// fxSelectChain is the chain Envoy gives c, following FilterChainManagerImpl::findFilterChain
// (envoy source/common/listener_manager/filter_chain_manager_impl.cc): destination port (exact,
// else the port-less chains), destination IP (the longest prefix containing it; port-less chains
// count as /0), server name (exact, else the chains without), transport protocol (exact, else
// without), application protocols (the first the connection lists that a chain names, else the
// chains without). Each level descends only into its best entry: when that entry's chains match
// nothing further down, the default chain is used. Several chains at the end is an overlap (Envoy
// refuses the listener): reported as an error.
func fxSelectChain(l *listenerv3.Listener, c fxConn) (*listenerv3.FilterChain, error) {
	ip := netip.MustParseAddr(c.ip)
	chains := l.GetFilterChains()
	levels := []func([]*listenerv3.FilterChain) []*listenerv3.FilterChain{
		func(cs []*listenerv3.FilterChain) []*listenerv3.FilterChain {
			exact := fxFilter(cs, func(m *listenerv3.FilterChainMatch) bool {
				return m.GetDestinationPort() != nil && m.GetDestinationPort().GetValue() == uint32(c.port)
			})
			if len(exact) > 0 {
				return exact
			}
			return fxFilter(cs, func(m *listenerv3.FilterChainMatch) bool { return m.GetDestinationPort() == nil })
		},
		func(cs []*listenerv3.FilterChain) []*listenerv3.FilterChain {
			best, bestBits := []*listenerv3.FilterChain(nil), -1
			for _, ch := range cs {
				bits := fxPrefixBits(ch.GetFilterChainMatch(), ip)
				switch {
				case bits > bestBits:
					best, bestBits = []*listenerv3.FilterChain{ch}, bits
				case bits == bestBits && bits >= 0:
					best = append(best, ch)
				}
			}
			return best
		},
		func(cs []*listenerv3.FilterChain) []*listenerv3.FilterChain {
			exact := fxFilter(cs, func(m *listenerv3.FilterChainMatch) bool { return slices.Contains(m.GetServerNames(), c.sni) })
			if c.sni != "" && len(exact) > 0 {
				return exact
			}
			return fxFilter(cs, func(m *listenerv3.FilterChainMatch) bool { return len(m.GetServerNames()) == 0 })
		},
		func(cs []*listenerv3.FilterChain) []*listenerv3.FilterChain {
			exact := fxFilter(cs, func(m *listenerv3.FilterChainMatch) bool { return m.GetTransportProtocol() == c.transport })
			if len(exact) > 0 {
				return exact
			}
			return fxFilter(cs, func(m *listenerv3.FilterChainMatch) bool { return m.GetTransportProtocol() == "" })
		},
		func(cs []*listenerv3.FilterChain) []*listenerv3.FilterChain {
			for _, app := range c.apps {
				if named := fxFilter(cs, func(m *listenerv3.FilterChainMatch) bool {
					return slices.Contains(m.GetApplicationProtocols(), app)
				}); len(named) > 0 {
					return named
				}
			}
			return fxFilter(cs, func(m *listenerv3.FilterChainMatch) bool { return len(m.GetApplicationProtocols()) == 0 })
		},
	}
	for _, level := range levels {
		chains = level(chains)
		if len(chains) == 0 {
			return l.GetDefaultFilterChain(), nil
		}
	}
	if len(chains) > 1 {
		return nil, fmt.Errorf("%s: %d chains match %+v: %v", l.GetName(), len(chains), c, fxNames(chains))
	}
	return chains[0], nil
}

func fxFilter(cs []*listenerv3.FilterChain, keep func(*listenerv3.FilterChainMatch) bool) []*listenerv3.FilterChain {
	var out []*listenerv3.FilterChain
	for _, ch := range cs {
		m := ch.GetFilterChainMatch()
		if m == nil {
			m = &listenerv3.FilterChainMatch{}
		}
		if keep(m) {
			out = append(out, ch)
		}
	}
	return out
}

// fxPrefixBits is the length of m's longest prefix range containing ip: 0 for a match without
// ranges, -1 when none contains it.
func fxPrefixBits(m *listenerv3.FilterChainMatch, ip netip.Addr) int {
	if len(m.GetPrefixRanges()) == 0 {
		return 0
	}
	best := -1
	for _, r := range m.GetPrefixRanges() {
		p, err := netip.ParseAddr(r.GetAddressPrefix())
		if err != nil {
			continue
		}
		prefix := netip.PrefixFrom(p, int(r.GetPrefixLen().GetValue()))
		if prefix.Contains(ip) && prefix.Bits() > best {
			best = prefix.Bits()
		}
	}
	return best
}

// fxOverlaps reports the matches two chains of l share, Envoy's "multiple filter chains with
// overlapping matching rules": each chain's match expanded over its repeated fields (prefix
// ranges, server names, application protocols), no tuple twice; and a chain name used twice.
func fxOverlaps(l *listenerv3.Listener) []string {
	orAny := func(s []string) []string {
		if len(s) == 0 {
			return []string{""}
		}
		return s
	}
	owner := map[string]string{}
	var overlaps []string
	names := map[string]bool{}
	for _, ch := range l.GetFilterChains() {
		if names[ch.GetName()] { // Envoy refuses two chains of one name too
			overlaps = append(overlaps, "two chains are named "+ch.GetName())
		}
		names[ch.GetName()] = true
		m := ch.GetFilterChainMatch()
		var prefixes []string
		for _, r := range m.GetPrefixRanges() {
			prefixes = append(prefixes, fmt.Sprintf("%s/%d", r.GetAddressPrefix(), r.GetPrefixLen().GetValue()))
		}
		for _, prefix := range orAny(prefixes) {
			for _, sni := range orAny(m.GetServerNames()) {
				for _, app := range orAny(m.GetApplicationProtocols()) {
					tuple := fmt.Sprintf("port=%d ip=%s sni=%s transport=%s app=%s",
						m.GetDestinationPort().GetValue(), prefix, sni, m.GetTransportProtocol(), app)
					if first, taken := owner[tuple]; taken {
						overlaps = append(overlaps, fmt.Sprintf("%s and %s both match %s", first, ch.GetName(), tuple))
						continue
					}
					owner[tuple] = ch.GetName()
				}
			}
		}
	}
	return overlaps
}
