// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xds_test

import (
	"slices"
	"strings"
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/reflect/protoreflect"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/xds"
	"github.com/aether-mesh/aether-operator/internal/xds/xdssim"
	"github.com/aether-mesh/aether-operator/internal/xds/xdstest"
)

// The bare name. The workload page: "a name without a namespace (Host: my-svc:8080) is my-svc in
// the caller's own namespace, as the cluster's DNS search makes it", and "a name that is not a
// mesh service is not the mesh's: ... a captured dial passes through to the address that was
// dialled". The expectations below are written from those sentences and from Envoy's answers
// (the route's cluster, the mesh's 421), not read from internal/resolve or the builder.

// bareNameMesh is the mixed payments (shop: HTTP 8080, h2 9090, TCP 9000) with its pod on this
// node as a client in shop, frontend (web) as a client in web, and, when twin is set, a service
// payments of namespace web too (HTTP 8080, one pod on another node).
func bareNameMesh(twin bool) model.Mesh {
	s := xdstest.Scenarios()["mixed-http-primary"]
	if twin {
		s.Services = append(s.Services, xdstest.ServiceDecl{Namespace: "web", Name: "payments", VIP: "10.96.0.30"})
		s.Workloads = append(s.Workloads, xdstest.Workload{Namespace: "web", Service: "payments", Name: "payments-web-0",
			Node: xdstest.SameRegion, Address: "10.244.2.30", Port: "8080", Health: meshv1alpha1.HealthHealthy, Created: xdstest.Day})
	}
	return s.Mesh()
}

// bareDial is one request of a client, by the capture listener of its pod.
type bareDial struct {
	name     string
	client   string // the client pod, <ns>/<name>
	port     uint32 // the port dialled on the VIP
	vip      string
	host     string
	http2    bool
	cluster  string // the cluster it must reach (the client's copy), or
	status   int    // the mesh's answer, with
	meshErr  string // its x-aether-error, or
	passthru bool   // the original destination, untouched (no mesh service of that name)
}

const (
	shopClient = "shop/payments-0"
	webClient  = "web/frontend-0"
	shopVIP    = "10.96.0.10"
)

// shopCluster is shop/payments' cluster for port as the client dials it.
func shopCluster(port int32, client string) string {
	return xds.SourceCluster(xds.HTTPCluster(xds.FQDN("payments", "shop", xdstest.Domain), port), identityOf(client))
}

func identityOf(podKey string) string {
	ns, name, _ := strings.Cut(podKey, "/")
	return xdstest.Identity(ns, map[string]string{"payments-0": "payments", "frontend-0": "frontend"}[name])
}

// TestBareNameFromItsNamespace: from a pod of the service's namespace, the bare name, with or
// without a port, on a captured connection or the HTTP proxy port, is the service: its ports'
// clusters and its own 421 answers, whatever the case of the Host.
func TestBareNameFromItsNamespace(t *testing.T) {
	checkBareDials(t, bareNameMesh(false), []bareDial{
		{name: "captured, Host payments:8080", client: shopClient, port: 8080, vip: shopVIP, host: "payments:8080", cluster: shopCluster(8080, shopClient)},
		{name: "proxy port, Host payments:8080", client: shopClient, port: 18081, vip: shopVIP, host: "payments:8080", cluster: shopCluster(8080, shopClient)},
		{name: "proxy port, HTTP/2, :authority payments:9090", client: shopClient, port: 18081, vip: shopVIP, host: "payments:9090", http2: true,
			cluster: shopCluster(9090, shopClient)},
		{name: "Host PAYMENTS:8080 (hosts match in any case)", client: shopClient, port: 18081, vip: shopVIP, host: "PAYMENTS:8080",
			cluster: shopCluster(8080, shopClient)},
		{name: "Host payments: port 80, not declared", client: shopClient, port: 18081, vip: shopVIP, host: "payments", status: 421, meshErr: "port-not-declared"},
		{name: "Host payments:9000: a TCP port", client: shopClient, port: 18081, vip: shopVIP, host: "payments:9000", status: 421, meshErr: "port-not-http"},
		{name: "Host payments:18081: the mesh's port", client: shopClient, port: 18081, vip: shopVIP, host: "payments:18081", status: 421, meshErr: "port-not-declared"},
		{name: "Host payments:18082: the mesh's TCP port", client: shopClient, port: 18081, vip: shopVIP, host: "payments:18082", status: 421, meshErr: "port-not-declared"},
		{name: "Host payments:7: no such port", client: shopClient, port: 18081, vip: shopVIP, host: "payments:7", status: 421, meshErr: "port-not-declared"},
	})
}

// TestBareNameFromAnotherNamespace: from another namespace the bare name is not that service:
// with no service of the name in the caller's namespace it is no mesh service (the original
// destination of a captured connection; 404 not-mesh-name on the proxy port); with one, it is
// that one.
func TestBareNameFromAnotherNamespace(t *testing.T) {
	t.Run("no service of the name in the caller's namespace", func(t *testing.T) {
		checkBareDials(t, bareNameMesh(false), []bareDial{
			{name: "proxy port, Host payments:8080", client: webClient, port: 18081, vip: shopVIP, host: "payments:8080", status: 404, meshErr: "not-mesh-name"},
			{name: "captured, Host payments:8080", client: webClient, port: 8080, vip: shopVIP, host: "payments:8080", passthru: true},
			{name: "proxy port, Host payments", client: webClient, port: 18081, vip: shopVIP, host: "payments", status: 404, meshErr: "not-mesh-name"},
		})
	})
	t.Run("a service of the name in each namespace", func(t *testing.T) {
		web := xds.SourceCluster(xds.HTTPCluster(xds.FQDN("payments", "web", xdstest.Domain), 8080), identityOf(webClient))
		checkBareDials(t, bareNameMesh(true), []bareDial{
			{name: "web's client: web's payments", client: webClient, port: 18081, vip: "10.96.0.30", host: "payments:8080", cluster: web},
			{name: "shop's client: shop's payments", client: shopClient, port: 18081, vip: shopVIP, host: "payments:8080", cluster: shopCluster(8080, shopClient)},
			{name: "web's client, Host payments.shop:8080: shop's", client: webClient, port: 18081, vip: shopVIP, host: "payments.shop:8080",
				cluster: shopCluster(8080, webClient)},
		})
	})
}

// checkBareDials walks each dial through what Build makes of m, Envoy's checks first.
func checkBareDials(t *testing.T, m model.Mesh, dials []bareDial) {
	t.Helper()
	sim := xdssim.New(build(t, m))
	if err := sim.Check(); err != nil {
		t.Fatalf("Envoy would reject the configuration: %v", err)
	}
	for _, d := range dials {
		t.Run(d.name, func(t *testing.T) {
			out := sim.Dial(xdssim.Conn{Listener: xds.CaptureListener(d.client), DstIP: d.vip, DstPort: d.port,
				HTTP: &xdssim.Request{Host: d.host, HTTP2: d.http2}})
			switch {
			case d.cluster != "":
				if out.Verdict != xdssim.Forwarded || len(out.Targets) != 1 || out.Targets[0].Cluster != d.cluster {
					t.Errorf("%s, Host %q: %s; want cluster %s", d.client, d.host, out, d.cluster)
				}
			case d.status != 0:
				if out.Verdict != xdssim.Answered || out.Response.Status != d.status || out.Response.Header("x-aether-error") != d.meshErr {
					t.Errorf("%s, Host %q: %s; want %d with x-aether-error %s", d.client, d.host, out, d.status, d.meshErr)
				}
			case d.passthru:
				if out.Verdict != xdssim.Passthrough || slices.ContainsFunc(out.Targets, func(tg xdssim.Target) bool {
					return strings.Contains(tg.Cluster, "payments.shop")
				}) {
					t.Errorf("%s, Host %q: %s; want the original destination (no mesh service of that name in %s)", d.client, d.host, out,
						strings.Split(d.client, "/")[0])
				}
			}
		})
	}
}

// TestBareNameNeverDuplicatesADomain: a bare name that is another service's name keeps that
// name's meaning and is left out, with a note, so no domain is in two virtual hosts (which Envoy
// refuses: xdssim's CheckRoutes). Service "payments.shop" of namespace web (a ServiceAccount name
// may hold dots) has the bare name "payments.shop", which is shop/payments' Kubernetes name.
func TestBareNameNeverDuplicatesADomain(t *testing.T) {
	s := xdstest.Scenarios()["mixed-http-primary"]
	s.Services = append(s.Services, xdstest.ServiceDecl{Namespace: "web", Name: "payments.shop", VIP: "10.96.0.31"})
	s.Workloads = append(s.Workloads, xdstest.Workload{Namespace: "web", Service: "payments.shop", Name: "dotted-0",
		Node: xdstest.SameRegion, Address: "10.244.2.31", Port: "8080", Health: meshv1alpha1.HealthHealthy, Created: xdstest.Day})
	m := s.Mesh()
	res := build(t, m)
	checkBareDials(t, m, []bareDial{
		{name: "web's client, Host payments.shop:8080: shop's payments", client: webClient, port: 18081, vip: shopVIP,
			host: "payments.shop:8080", cluster: shopCluster(8080, webClient)},
	})
	const note = `no virtual hosts for bare name "payments.shop" of service web/payments.shop (from namespace web): it is a name of service shop/payments, which keeps it`
	if !slices.ContainsFunc(res.Skipped, func(s string) bool { return strings.Contains(s, note) }) {
		t.Errorf("Skipped does not say %q: %q", note, res.Skipped)
	}

	// The negative control: the bare name's domain put in web's route configuration anyway is a
	// duplicate Envoy refuses.
	for _, rc := range res.Routes {
		if rc.GetName() != xds.CaptureRoutes(identityOf(webClient)) {
			continue
		}
		for _, vh := range rc.GetVirtualHosts() {
			if slices.Contains(vh.GetDomains(), "payments.shop.web:8080") {
				vh.Domains = append(vh.Domains, "payments.shop:8080")
			}
		}
	}
	err := xdssim.New(res).Check()
	if err == nil || !strings.Contains(err.Error(), `domain "payments.shop:8080" is in virtual hosts`) {
		t.Fatalf("the duplicate bare name: Check says %v; want the duplicate domain refused", err)
	}
	t.Logf("control: %v", err)
}

// TestBuiltVirtualHostsCopyWhole: the capture virtual hosts set a name, domains, routes and
// per-filter configs only,
// so the copy that adds the bare name's domains for an identity of the service's namespace
// (withDomains) keeps all of a shared answer. A field added to them later fails here: copy it
// there too. The negative control sets one more field.
func TestBuiltVirtualHostsCopyWhole(t *testing.T) {
	for name, m := range xdstest.All() {
		for _, rc := range build(t, m).Routes {
			for _, vh := range rc.GetVirtualHosts() {
				if extra := extraVirtualHostFields(vh); len(extra) > 0 {
					t.Errorf("%s: %s, virtual host %s sets %q besides its name, domains, routes and per-filter configs: copy them in withDomains",
						name, rc.GetName(), vh.GetName(), extra)
				}
			}
		}
	}
	control := &routev3.VirtualHost{Name: "v", Domains: []string{"v"}, RequireTls: routev3.VirtualHost_ALL}
	if extra := extraVirtualHostFields(control); !slices.Equal(extra, []string{"require_tls"}) {
		t.Errorf("negative control: a virtual host with require_tls gives %q", extra)
	}
}

// extraVirtualHostFields are the fields vh sets other than name, domains and routes.
func extraVirtualHostFields(vh *routev3.VirtualHost) []string {
	var extra []string
	vh.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, _ protoreflect.Value) bool {
		if n := string(fd.Name()); n != "name" && n != "domains" && n != "routes" && n != "typed_per_filter_config" {
			extra = append(extra, n)
		}
		return true
	})
	return extra
}

// TestProxylessBareName: a proxyless gRPC client dials the bare name the way grpc-go asks for it,
// xds:///payments:9090 → the API listener "payments:9090", which it is served from the service's
// namespace only, on the same route configuration as the service's other names.
func TestProxylessBareName(t *testing.T) {
	mesh := grpcScenario().Mesh()
	for _, tc := range []struct {
		client string
		want   bool
	}{{xdstest.Identity("shop", "payments"), true}, {frontendClient, false}} {
		res := buildProxyless(t, mesh, xds.ProxylessClient{Identity: tc.client, SNI: true})
		listeners := names(res.Listeners, (*listenerv3.Listener).GetName)
		if got := slices.Contains(listeners, "payments:9090"); got != tc.want {
			t.Errorf("client %s: a listener payments:9090 is %v, want %v (listeners %q)", tc.client, got, tc.want, listeners)
		}
		rds := xds.ProxylessRoutes(xds.FQDN("payments", "shop", xdstest.Domain), 9090)
		for _, l := range res.Listeners {
			if l.GetName() == "payments:9090" && rdsOf(t, l) != rds {
				t.Errorf("client %s: payments:9090 routes by %q, want %q", tc.client, rdsOf(t, l), rds)
			}
		}
		for _, rc := range res.Routes {
			if rc.GetName() == rds && slices.Contains(rc.GetVirtualHosts()[0].GetDomains(), "payments:9090") != tc.want {
				t.Errorf("client %s: the domains of %s are %q; payments:9090 among them: want %v", tc.client, rds,
					rc.GetVirtualHosts()[0].GetDomains(), tc.want)
			}
		}
	}
}

// TestWalkCatchesAMissingBareName is the negative control of the surface walk for the bare name:
// the route configurations without their bare-name domains (today's configuration before the
// bare name) must fail the walk, which dials the bare names from the service's namespace.
func TestWalkCatchesAMissingBareName(t *testing.T) {
	withoutBareNames := func(m model.Mesh) (xds.Resources, error) {
		res, err := xds.Build(m)
		for _, rc := range res.Routes {
			for _, vh := range rc.GetVirtualHosts() {
				vh.Domains = slices.DeleteFunc(slices.Clone(vh.GetDomains()), func(d string) bool {
					host, _, _ := strings.Cut(d, ":")
					return host != "*" && !strings.Contains(host, ".")
				})
			}
		}
		return res, err
	}
	fake := &recorder{TB: t}
	fake.walk(xdstest.MixedHTTPPrimary(), withoutBareNames)
	if len(fake.failures) == 0 {
		t.Fatal("the walk passed without the bare names; it must fail")
	}
	t.Logf("caught (%d failures), e.g. %s", len(fake.failures), fake.failures[0])
}
