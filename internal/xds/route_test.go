// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xds_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/proto"

	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/resolve"
	"github.com/aether-mesh/aether-operator/internal/xds"
)

// fxSelectVirtualHost is the virtual host Envoy gives a request with Host host: lower-cased, an
// exact domain first, then suffix wildcards (*.x), then prefix wildcards (x*), the longest first,
// then "*".
func fxSelectVirtualHost(rc *routev3.RouteConfiguration, host string) *routev3.VirtualHost {
	host = strings.ToLower(host)
	var best *routev3.VirtualHost
	bestRank, bestLen := 4, -1
	for _, v := range rc.GetVirtualHosts() {
		for _, d := range v.GetDomains() {
			d = strings.ToLower(d)
			rank, length := 4, len(d)
			switch {
			case d == host:
				rank = 0
			case d == "*":
				rank = 3
			case strings.HasPrefix(d, "*") && strings.HasSuffix(host, d[1:]) && len(host) > len(d)-1:
				rank = 1
			case strings.HasSuffix(d, "*") && strings.HasPrefix(host, d[:len(d)-1]) && len(host) > len(d)-1:
				rank = 2
			}
			if rank < bestRank || rank == bestRank && rank < 4 && length > bestLen {
				best, bestRank, bestLen = v, rank, length
			}
		}
	}
	return best
}

// fxAnswer is what a virtual host does with a request: "route <cluster>" or "<status> <error>
// <body>".
func fxAnswer(t testing.TB, v *routev3.VirtualHost) string {
	t.Helper()
	routes := v.GetRoutes()
	// A wildcard <name>:* virtual host first answers Host <name>:18082 in resolve's words for it
	// (the dial-surface walk checks that answer); its last route is the wildcard's own.
	if len(routes) == 2 && routes[0].GetMatch().GetHeaders()[0].GetName() == ":authority" {
		routes = routes[1:]
	}
	// A route to a cluster comes after its idempotent twin (outcome.go): the same match and
	// cluster, for the idempotent methods only.
	if len(routes) == 2 && routes[0].GetMatch().GetHeaders()[0].GetName() == ":method" {
		twin := routes[0]
		routes = routes[1:]
		if twin.GetRoute().GetCluster() != routes[0].GetRoute().GetCluster() || twin.GetMatch().GetPrefix() != routes[0].GetMatch().GetPrefix() {
			t.Errorf("virtual host %s: the idempotent twin %v differs from its route %v", v.GetName(), twin, routes[0])
		}
	}
	if len(routes) != 1 {
		t.Fatalf("virtual host %s has %d routes, want 1", v.GetName(), len(routes))
	}
	r := routes[0]
	if r.GetMatch().GetPrefix() != "/" {
		t.Errorf("virtual host %s: route matches %v, want every path", v.GetName(), r.GetMatch())
	}
	if dr := r.GetDirectResponse(); dr != nil {
		headers := r.GetResponseHeadersToAdd()
		if len(headers) != 1 || headers[0].GetHeader().GetKey() != resolve.ErrorHeader {
			t.Fatalf("virtual host %s: response headers %v, want one %s", v.GetName(), headers, resolve.ErrorHeader)
		}
		return fmt.Sprintf("%d %s %s", dr.GetStatus(), headers[0].GetHeader().GetValue(), dr.GetBody().GetInlineString())
	}
	if r.GetRoute().GetTimeout().AsDuration() != 0 {
		t.Errorf("virtual host %s: route timeout %v, want none", v.GetName(), r.GetRoute().GetTimeout().AsDuration())
	}
	return "route " + r.GetRoute().GetCluster()
}

// fxResolveAnswer is what resolve says a request with Host host gets from a client of identity,
// written as fxAnswer writes it, in the words of the service's mesh name (the Host's port kept;
// "*" is the dial surface's "Host: <name>:*" row); ok is false when host names no service of m.
// It fails the test when resolve's status and x-aether-error for the Host itself differ.
func fxResolveAnswer(t testing.TB, m model.Mesh, identity, host string) (string, bool) {
	t.Helper()
	name, port, hasPort := strings.Cut(strings.ToLower(host), ":")
	for _, s := range m.Services {
		if !slices.Contains(resolve.NamesFrom(s.Name, s.Namespace, fxNamespaceOf(identity), m.Domain), name) {
			continue
		}
		ps := s.PortSet()
		meshName := xds.FQDN(s.Name, s.Namespace, m.Domain)
		var r resolve.Result
		switch {
		case hasPort && port == "*":
			for _, d := range resolve.DialSurface(ps, m.Issuer) {
				if d.Address == resolve.HostRowPrefix+resolve.NamePlaceholder+":"+resolve.AnyOtherPort {
					r = d.For(meshName).Result
				}
			}
		case hasPort:
			r = resolve.HTTPRequest(ps, meshName+":"+port)
		default:
			r = resolve.HTTPRequest(ps, meshName)
		}
		if exact := resolve.HTTPRequest(ps, strings.ToLower(host)); port != "*" && (exact.Outcome != r.Outcome || exact.Error != r.Error || exact.Port != r.Port) {
			t.Errorf("Host %s: resolve answers %s %s (port %d), for the mesh name %s %s (port %d)", host,
				exact.Outcome, exact.Error, exact.Port, r.Outcome, r.Error, r.Port)
		}
		if r.Outcome == resolve.Reaches {
			return "route " + xds.SourceCluster(xds.HTTPCluster(meshName, r.Port), identity), true
		}
		return fmt.Sprintf("%d %s %s", resolve.HTTPStatus(r.Outcome), r.Error, r.Body), true
	}
	return "", false
}

// fxNamespaceOf is the namespace of identity, spiffe://<domain>/ns/<ns>/sa/<sa>.
func fxNamespaceOf(identity string) string {
	namespace, _, _ := strings.Cut(xds.SourceKey(identity), "/")
	return namespace
}

// Every domain of every virtual host answers what resolve says for that Host, word for word in
// the words of the mesh name (the wildcard: the dial surface's "Host: <name>:*" row); every name of every service has its
// portless domain, one per declared port, :18081 and the wildcard. The names are those that hold
// from the route configuration's identity's namespace (resolve.NamesFrom): a bare name only there.
func TestCaptureRoutesAnswerLikeResolve(t *testing.T) {
	m := fxMixedMesh(t)
	res := fxBuild(t, m)
	for _, rc := range res.Routes {
		identity := ""
		for _, p := range m.Pods {
			if xds.CaptureRoutes(p.Identity) == rc.GetName() || xds.ProxyRoutes(p.Identity) == rc.GetName() {
				identity = p.Identity
			}
		}
		if rc.GetValidateClusters() == nil || rc.GetValidateClusters().GetValue() {
			t.Errorf("%s: validate_clusters %v, want false (CDS may lag RDS)", rc.GetName(), rc.GetValidateClusters())
		}
		domains := map[string]bool{}
		for _, v := range rc.GetVirtualHosts() {
			for _, d := range v.GetDomains() {
				domains[d] = true
				if d == "*" {
					// A captured request for no mesh name goes on to its destination; on the proxy
					// port it is answered 404 (resolve.NotMeshName).
					name, answer := xds.CaptureCatchAllVirtualHost, "route "+xds.PassthroughCluster
					if strings.HasPrefix(rc.GetName(), "proxy|") {
						nm := resolve.NotMeshName(m.Domain)
						name, answer = xds.ProxyNotMeshVirtualHost, fmt.Sprintf("404 %s %s", nm.Error, nm.Body)
					}
					if v.GetName() != name || fxAnswer(t, v) != answer {
						t.Errorf("%s: the catch-all is %s answering %q, want %s answering %q", rc.GetName(), v.GetName(),
							fxAnswer(t, v), name, answer)
					}
					continue
				}
				want, ok := fxResolveAnswer(t, m, identity, d)
				if !ok {
					t.Errorf("%s: domain %q names no service", rc.GetName(), d)
					continue
				}
				if got := fxAnswer(t, v); got != want {
					t.Errorf("%s: Host %q gets\n%s\nresolve says\n%s", rc.GetName(), d, got, want)
				}
			}
		}
		for _, s := range m.Services {
			for _, name := range resolve.NamesFrom(s.Name, s.Namespace, fxNamespaceOf(identity), m.Domain) {
				want := []string{name, name + ":18081", name + ":*"}
				for _, p := range s.Ports {
					want = append(want, fmt.Sprintf("%s:%d", name, p.Number))
				}
				for _, d := range want {
					if !domains[d] {
						t.Errorf("%s: no domain %q", rc.GetName(), d)
					}
				}
			}
		}
	}
}

// Hosts as a client writes them land on resolve's answer through Envoy's domain order.
func TestCaptureRoutesHostMatching(t *testing.T) {
	m := fxMixedMesh(t)
	client := fxClient(t)
	rc := fxRoutes(t, fxBuild(t, m), xds.CaptureRoutes(client.Identity))
	for _, host := range []string{
		"payments.shop.aether.internal", "PAYMENTS.Shop.aether.internal:8080", "payments.shop:9090",
		"payments.shop.svc.cluster.local:9000", "payments.shop:18082", "payments.shop:18081", "payments.shop:1234",
		"payments.shop:80", "site.shop", "site.shop:80", "site.shop:443", "legacy.shop", "db.shop:18082",
		"metrics.ops:9100", "empty.ops", "empty.ops:8080",
	} {
		want, _ := fxResolveAnswer(t, m, client.Identity, host)
		if name, port, _ := strings.Cut(host, ":"); fxWildcardPort(m, name, port) {
			// No domain spells this port: the name's wildcard answers, with the same status and
			// x-aether-error as resolve's answer for the Host, in the surface row's words.
			exact := want
			want, _ = fxResolveAnswer(t, m, client.Identity, name+":*")
			if code := strings.Join(strings.Fields(want)[:2], " "); !strings.HasPrefix(exact, code+" ") {
				t.Errorf("Host %s: the wildcard answers %q, resolve %q", host, code, exact)
			}
		}
		v := fxSelectVirtualHost(rc, host)
		if v == nil {
			t.Errorf("Host %s matches no virtual host", host)
			continue
		}
		if got := fxAnswer(t, v); got != want {
			t.Errorf("Host %s (virtual host %s) gets\n%s\nwant\n%s", host, v.GetName(), got, want)
		}
	}
	for _, host := range []string{"example.com", "example.com:8080", "10.96.0.10:8080", "payments.shop.evil"} {
		if v := fxSelectVirtualHost(rc, host); v.GetName() != xds.CaptureCatchAllVirtualHost {
			t.Errorf("Host %s takes virtual host %s, want the catch-all", host, v.GetName())
		}
	}
}

// fxWildcardPort says whether Host <name>:<port> takes the name's wildcard: a port, not 18081,
// that the service name names does not declare.
func fxWildcardPort(m model.Mesh, name, port string) bool {
	if port == "" || port == "18081" {
		return false
	}
	for _, s := range m.Services {
		if slices.Contains(resolve.Names(s.Name, s.Namespace, m.Domain), strings.ToLower(name)) {
			return !slices.ContainsFunc(s.Ports, func(p model.Port) bool { return fmt.Sprint(p.Number) == port })
		}
	}
	return false
}

// fxDomainProblems is the domain gate: a domain in two virtual hosts (Envoy compares them
// lower-cased and refuses the configuration) or spelling port 18082 (HTTP to the TCP mesh port
// must never reach an HTTP cluster).
func fxDomainProblems(rc *routev3.RouteConfiguration) []string {
	var problems []string
	owner := map[string]string{}
	for _, v := range rc.GetVirtualHosts() {
		for _, d := range v.GetDomains() {
			key := strings.ToLower(d)
			if first, taken := owner[key]; taken {
				problems = append(problems, fmt.Sprintf("domain %q is in %s and %s", d, first, v.GetName()))
			}
			owner[key] = v.GetName()
			if strings.HasSuffix(d, ":18082") {
				problems = append(problems, fmt.Sprintf("domain %q (virtual host %s) spells :18082", d, v.GetName()))
			}
		}
	}
	return problems
}

// The domain gate over every route configuration, with its negative controls: a domain in a
// second virtual host (in another case) and a domain spelling :18082.
func TestCaptureRoutesDomainGate(t *testing.T) {
	res := fxBuild(t, fxMixedMesh(t))
	for _, rc := range res.Routes {
		if problems := fxDomainProblems(rc); len(problems) > 0 {
			t.Errorf("%s: %v", rc.GetName(), problems)
		}
	}
	rc := res.Routes[0]
	for name, mutate := range map[string]func(*routev3.RouteConfiguration){
		"a domain twice": func(rc *routev3.RouteConfiguration) {
			rc.VirtualHosts[0].Domains = append(rc.VirtualHosts[0].Domains, strings.ToUpper(rc.VirtualHosts[1].Domains[0]))
		},
		"a :18082 domain": func(rc *routev3.RouteConfiguration) {
			rc.VirtualHosts[0].Domains = append(rc.VirtualHosts[0].Domains, "payments.shop:18082")
		},
	} {
		broken := proto.Clone(rc).(*routev3.RouteConfiguration)
		mutate(broken)
		problems := fxDomainProblems(broken)
		if len(problems) == 0 {
			t.Errorf("negative control %q: the gate passed", name)
			continue
		}
		t.Logf("negative control %q: %v", name, problems)
	}
}

// Names two services could both claim are held once: a Kubernetes name beats another service's
// short name, and a mesh domain equal to svc.cluster.local (one service's two names the same) is
// no conflict.
func TestCaptureRoutesNameCollisions(t *testing.T) {
	client := fxClient(t)
	// The short name of svc "payments.shop.svc.cluster" in namespace "local" is payments's
	// Kubernetes name.
	payments := fxService(t, "shop", "payments", "10.96.0.10", 8080, "8080/HTTP")
	impostor := fxService(t, "local", "payments.shop.svc.cluster", "10.96.0.11", 9000, "9000/HTTP")
	m := fxMesh([]model.LocalPod{client}, payments, impostor)
	rc := fxRoutes(t, fxBuild(t, m), xds.CaptureRoutes(client.Identity))
	if problems := fxDomainProblems(rc); len(problems) > 0 {
		t.Fatalf("domains: %v", problems)
	}
	v := fxSelectVirtualHost(rc, "payments.shop.svc.cluster.local:8080")
	want := "route " + xds.SourceCluster(xds.HTTPCluster(xds.FQDN("payments", "shop", fxDomain), 8080), client.Identity)
	if got := fxAnswer(t, v); got != want {
		t.Errorf("payments.shop.svc.cluster.local:8080 gets %s, want %s", got, want)
	}
	skipped := fxBuild(t, m).Skipped
	if len(skipped) != 1 || !strings.Contains(skipped[0],
		`name "payments.shop.svc.cluster.local" of service local/payments.shop.svc.cluster: it is also a name of service shop/payments`) {
		t.Errorf("Skipped says %v, want the impostor's short name left out", skipped)
	}

	m.Domain = "svc.cluster.local"
	m.Pods[0].Identity = "spiffe://svc.cluster.local/ns/shop/sa/web"
	res := fxBuild(t, m)
	for _, rc := range res.Routes {
		if problems := fxDomainProblems(rc); len(problems) > 0 {
			t.Errorf("mesh domain svc.cluster.local: %v", problems)
		}
	}
}

// One capture and one proxy route configuration per distinct local identity; pods of one
// identity share them, their capture HCMs name the capture one and the proxy port's HCM
// (cap_http_18081) the proxy one.
func TestCaptureRoutesPerIdentity(t *testing.T) {
	m := fxMixedMesh(t) // web-0 and web-1 are web; payments-0 is payments
	res := fxBuild(t, m)
	want := []string{xds.CaptureRoutes(fxIdentity("shop", "payments")), xds.CaptureRoutes(fxIdentity("shop", "web")),
		xds.ProxyRoutes(fxIdentity("shop", "payments")), xds.ProxyRoutes(fxIdentity("shop", "web"))}
	if got := fxNames(res.Routes); !slices.Equal(got, want) {
		t.Errorf("route configurations %v, want %v", got, want)
	}
	for _, p := range m.Pods {
		l := fxListener(t, res, xds.CaptureListener(xds.PodKey(p.Namespace, p.Name)))
		for _, ch := range l.GetFilterChains() {
			want := "hcm:" + xds.CaptureRoutes(p.Identity)
			if ch.GetName() == xds.CaptureHTTPPortChain(18081) {
				want = "hcm:" + xds.ProxyRoutes(p.Identity)
			}
			if target := fxChainTarget(t, ch); strings.HasPrefix(target, "hcm:") && target != want {
				t.Errorf("%s: chain %s routes by %s, want its identity's %s", l.GetName(), ch.GetName(), target, want)
			}
		}
	}
	// The 421 answers do not depend on the source; the routes to clusters do.
	payments, web := res.Routes[0], res.Routes[1]
	host := "db.shop"
	if a, b := fxAnswer(t, fxSelectVirtualHost(payments, host)), fxAnswer(t, fxSelectVirtualHost(web, host)); a != b {
		t.Errorf("Host %s: %q for payments, %q for web", host, a, b)
	}
	host = "payments.shop:8080"
	if a, b := fxAnswer(t, fxSelectVirtualHost(payments, host)), fxAnswer(t, fxSelectVirtualHost(web, host)); a == b {
		t.Errorf("Host %s: both sources reach %q; the clusters carry the source's certificate", host, a)
	}
}
