// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdstest

import (
	"slices"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	configv1 "github.com/aether-mesh/aether-operator/api/config/v1"
	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/workloadidentity"
)

// The scenarios of proposal 037's resolution table (and DESIGN section 5), one function each.
// Every scenario has the same cast: frontend (namespace web, one pod on this node, HTTP 8080)
// is the client; payments (namespace shop) is the service under test, with one pod on this node
// (so its inbound listener shows the scenario's ports), one in the same region and one in
// another region. What changes between scenarios is payments' declaration.

const (
	healthy   = meshv1alpha1.HealthHealthy
	draining  = meshv1alpha1.HealthDraining
	shop, web = "shop", "web"
	// The services of the scenarios (and of the fuzz decoder).
	frontendService, paymentsService, catalogService = "frontend", "payments", "catalog"
	canaryService                                    = "payments-canary"
	// canaryVIP is payments-canary's VIP in the routed scenarios; catalogVIP is catalog's.
	canaryVIP  = "10.96.0.12"
	catalogVIP = "10.96.0.11"
	// catalogPod is catalog's one pod, in the same region, at catalogAddress.
	catalogPod, catalogAddress = "catalog-0", "10.244.2.11"
)

// at is hh:00 on Day.
func at(hour int) time.Time { return Day.Add(time.Duration(hour) * time.Hour) }

// frontend is the client pod: on this node, HTTP 8080, in the given capture mode.
func frontend(capture model.CaptureMode) Workload {
	return Workload{Namespace: web, Service: frontendService, Name: "frontend-0", Node: ThisNode, Address: "10.244.1.20",
		Port: "8080", Health: healthy, Created: at(8), Capture: capture}
}

// payments are the three pods of payments, one per node, declaring port, ports and protocol.
func payments(port, ports, protocol string) []Workload {
	var out []Workload
	for i, n := range []struct{ node, address string }{{ThisNode, "10.244.1.10"}, {SameRegion, "10.244.2.10"}, {OtherRegion, "10.244.3.10"}} {
		out = append(out, Workload{Namespace: shop, Service: paymentsService, Name: "payments-" + strconv.Itoa(i), Node: n.node,
			Address: n.address, Port: port, Ports: ports, Protocol: protocol, Health: healthy, Created: at(9)})
	}
	return out
}

// cast is the services of the common cast.
func cast() []ServiceDecl {
	return []ServiceDecl{{shop, paymentsService, "10.96.0.10"}, {web, frontendService, "10.96.0.20"}}
}

// simple is the common cast with payments declaring port, ports and protocol.
func simple(port, ports, protocol string) Scenario {
	return Scenario{Services: cast(), Workloads: append(payments(port, ports, protocol), frontend(model.CaptureSurface))}
}

// Subsets is the mesh where payments serves HTTP 8080 (primary) and TCP 9000, and its pods
// publish subset metadata: payments-0 version v1, payments-1 version v2 and shard s1,
// payments-2 version v2 and shard s2. Its HTTP clusters select by ip, pod, version, shard and
// both; its TCP clusters carry no subset config; frontend's routes to it map the x-aether-*
// headers to the envoy.lb metadata.
func Subsets() model.Mesh { return subsets().Mesh() }

func subsets() Scenario {
	s := simple("8080", "8080,9000=tcp", "")
	const version, shard = "version", "shard"
	s.Workloads[0].Metadata = map[string]string{version: "v1"}
	s.Workloads[1].Metadata = map[string]string{version: "v2", shard: "s1"}
	s.Workloads[2].Metadata = map[string]string{version: "v2", shard: "s2"}
	return s
}

// PureHTTP is the mesh where payments serves HTTP only, on 8080 (primary) and 8081:
// http://payments/ is 421 port-not-declared (no 80); :8080 and :8081 are HTTP; :18082 is
// refused (no TCP port).
func PureHTTP() model.Mesh { return pureHTTP().Mesh() }

func pureHTTP() Scenario { return simple("8080", "8080,8081", "") }

// PureTCP is the mesh where payments serves one TCP port, 5432, its primary: :18082 and :5432
// reach it with SNI "5432" (every hop names its port, the primary too); http:// is 421
// no-http-port.
func PureTCP() model.Mesh { return pureTCP().Mesh() }

func pureTCP() Scenario { return simple("5432", "", "tcp") }

// MixedHTTPPrimary is the mesh where payments serves HTTP 8080 (primary), h2 9090 and TCP
// 9000; the default TCP port is 9000 (the lowest TCP port, not the primary: SNI "9000"). The
// pod in another region is draining.
func MixedHTTPPrimary() model.Mesh { return mixedHTTPPrimary().Mesh() }

func mixedHTTPPrimary() Scenario {
	s := simple("8080", "8080,9090=h2,9000=tcp", "")
	s.Workloads[2].Health = draining
	return s
}

// TCPPrimaryHTTPSecondary is the mesh where payments' primary is TCP 9000, with HTTP 8080
// beside it (protocol tcp, ports 9000,8080=h1): :18082 reaches 9000 with SNI "9000"; :8080 is
// HTTP; http:// is 421 port-not-declared.
func TCPPrimaryHTTPSecondary() model.Mesh { return tcpPrimaryHTTPSecondary().Mesh() }

func tcpPrimaryHTTPSecondary() Scenario { return simple("9000", "9000,8080=h1", "tcp") }

// NoHTTPPort is the mesh where payments serves TCP 5432 and 6379 (primary 6379, the default
// TCP port): http:// is 421 no-http-port; :5432 carries SNI "5432", :6379 and :18082 "6379".
func NoHTTPPort() model.Mesh { return noHTTPPort().Mesh() }

func noHTTPPort() Scenario { return simple("6379", "5432,6379", "tcp") }

// HTTP80 is the mesh where payments declares 80 (primary) and 8080: http://payments/ reaches 80.
func HTTP80() model.Mesh { return http80().Mesh() }

func http80() Scenario { return simple("80", "80,8080", "") }

// HTTPS443TCP is the mesh where payments serves HTTP 8080 (primary) and 443=tcp, its app's own
// TLS: https:// reaches 443 through cap_tcp_<svc>_443, and 443 is also the default TCP port.
func HTTPS443TCP() model.Mesh { return https443TCP().Mesh() }

func https443TCP() Scenario { return simple("8080", "8080,443=tcp", "") }

// UDPPorts is the mesh where payments' primary is UDP 5353, beside HTTP 8080 and TCP 9000
// (ports 5353=udp,8080,9000=tcp): the node proxy does not carry UDP yet, so 5353 gets no chain,
// cluster or load assignment, and payments' inbound listener has no floor chain (no TCP port is
// its primary); :8080 is HTTP, :9000 and :18082 reach TCP 9000, and Host: payments:5353 is 421
// port-not-http.
func UDPPorts() model.Mesh { return udpPorts().Mesh() }

func udpPorts() Scenario { return simple("5353", "5353=udp,8080,9000=tcp", "") }

// UDPPortsDeclared is UDPPorts with payments declaring ports instead (its primary still 5353):
// what a test compares the UDP scenario with.
func UDPPortsDeclared(ports string) model.Mesh { return simple("5353", ports, "").Mesh() }

// Scoped is the mesh where both local pods capture in scoped mode, with the mixed payments and
// catalog (HTTP only): the capture listeners carry cap_tcp_blackhole for the :18082
// connections no service claims.
func Scoped() model.Mesh { return scoped().Mesh() }

func scoped() Scenario {
	s := mixedHTTPPrimary()
	s.Services = append(s.Services, ServiceDecl{shop, catalogService, catalogVIP})
	s.Workloads = append(s.Workloads, Workload{Namespace: shop, Service: catalogService, Name: catalogPod, Node: SameRegion,
		Address: catalogAddress, Port: "8080", Health: healthy, Created: at(9)})
	for i := range s.Workloads {
		if s.Workloads[i].Node == ThisNode {
			s.Workloads[i].Capture = model.CaptureScoped
		}
	}
	return s
}

// RolloutConflict is the mesh where payments is retyping 9000 from TCP to HTTP. The two older
// pods (other nodes) declare 9000=tcp; the newer pod on this node declares 9000 as HTTP. The
// vote (most ready) routes 9000 as TCP and its load assignment holds only the two TCP members,
// while this node's pod serves 9000 as HTTP on its own inbound listener.
func RolloutConflict() model.Mesh { return rolloutConflict().Mesh() }

func rolloutConflict() Scenario {
	s := simple("8080", "8080,9000=tcp", "")
	s.Workloads[0].Ports, s.Workloads[0].Created = "8080,9000", at(11)
	return s
}

// PrimaryRollout is the mesh where payments is moving its primary from HTTP 8080 to TCP 9000:
// every pod serves both ports, the two older pods (other nodes) still declare 8080 primary, the
// newer pod on this node declares 9000. The vote makes 8080 the service's primary, while this
// node's pod's own primary, what its inbound's default chain serves, is 9000. Every hop names its
// port by SNI, so 8080 reaches 8080 on every pod, this one included.
func PrimaryRollout() model.Mesh { return primaryRollout().Mesh() }

func primaryRollout() Scenario {
	s := simple("8080", "8080,9000=tcp", "")
	s.Workloads[0].Port, s.Workloads[0].Created = "9000", at(11)
	return s
}

// Routes is the mesh where the mixed payments and payments-canary (same ports) carry an
// HTTPRoute splitting payments:8080 (/v2 all to the canary, the rest 9:1), a GRPCRoute sending
// payments:9090's pkg.Ledger service to the canary, and a TCPRoute weighting payments:9000 3:1,
// so routes and tcp_proxy chains carry matches and weighted clusters.
func Routes() model.Mesh { return routes().Mesh() }

func routes() Scenario {
	s := simple("8080", "8080,9090=h2,9000=tcp", "")
	s.Services = append(s.Services, ServiceDecl{shop, canaryService, canaryVIP})
	s.Workloads = append(s.Workloads, Workload{Namespace: shop, Service: canaryService, Name: "payments-canary-0", Node: SameRegion,
		Address: "10.244.2.12", Port: "8080", Ports: "8080,9090=h2,9000=tcp", Health: healthy, Created: at(10)})
	stable := func(port, weight int32) model.Backend {
		return model.Backend{ServiceRef: model.ServiceRef{Namespace: shop, Name: paymentsService, Port: port}, Weight: weight}
	}
	canary := func(port int32) model.Backend { // the canary gets weight 1 where it shares traffic
		return model.Backend{ServiceRef: model.ServiceRef{Namespace: shop, Name: canaryService, Port: port}, Weight: 1}
	}
	s.Routes = []model.Route{
		{Kind: model.HTTPRoute, Namespace: shop, Name: "payments-split",
			Parents: []model.ServiceRef{{Namespace: shop, Name: paymentsService, Port: 8080}},
			Rules: []model.RouteRule{
				{Matches: []model.RouteMatch{{PathType: "PathPrefix", Path: "/v2"}}, Backends: []model.Backend{canary(8080)}},
				{Backends: []model.Backend{stable(8080, 9), canary(8080)}},
			}},
		{Kind: model.GRPCRoute, Namespace: shop, Name: "payments-grpc",
			Parents: []model.ServiceRef{{Namespace: shop, Name: paymentsService, Port: 9090}},
			Rules: []model.RouteRule{
				{Matches: []model.RouteMatch{{GRPCService: "pkg.Ledger"}}, Backends: []model.Backend{canary(9090)}},
				{Backends: []model.Backend{stable(9090, 1)}},
			}},
		{Kind: model.TCPRoute, Namespace: shop, Name: "payments-tcp",
			Parents: []model.ServiceRef{{Namespace: shop, Name: paymentsService, Port: 9000}},
			Rules:   []model.RouteRule{{Backends: []model.Backend{stable(9000, 3), canary(9000)}}}},
	}
	return s
}

// TLSRoutes is the mesh where payments and payments-canary serve HTTP 8080 (primary) and their
// app's own TLS on 443=tcp, and a TLSRoute on payments:443 sends the SNI names
// payments.example.com and *.payments.example.com half to the canary: the capture listeners
// carry its SNI chain beside cap_tcp_<svc>_443 and, 443 being the default TCP port, beside
// cap_tcp_<svc> (:18082); other TLS and raw bytes to those ports are closed (GAMMA: the route
// replaces the port's implicit route).
func TLSRoutes() model.Mesh { return tlsRoutes().Mesh() }

func tlsRoutes() Scenario {
	s := https443TCP()
	s.Services = append(s.Services, ServiceDecl{shop, canaryService, canaryVIP})
	s.Workloads = append(s.Workloads, Workload{Namespace: shop, Service: canaryService, Name: "payments-canary-0", Node: SameRegion,
		Address: "10.244.2.12", Port: "8080", Ports: "8080,443=tcp", Health: healthy, Created: at(10)})
	backend := func(service string) model.Backend {
		return model.Backend{ServiceRef: model.ServiceRef{Namespace: shop, Name: service, Port: 443}, Weight: 1}
	}
	s.Routes = []model.Route{{Kind: model.TLSRoute, Namespace: shop, Name: "payments-tls",
		Parents:   []model.ServiceRef{{Namespace: shop, Name: paymentsService, Port: 443}},
		Hostnames: []string{"payments.example.com", "*.payments.example.com"},
		Rules:     []model.RouteRule{{Backends: []model.Backend{backend(paymentsService), backend(canaryService)}}}}}
	return s
}

// NoIssuer is the mesh without a workload-identity issuer (--identity-issuer=none) where payments
// serves HTTP 8080 (primary), h2 9090, TCP 9000 and its app's own TLS on 443=tcp (443 the default
// TCP port): no raw-TCP cluster is built, and a captured dial of its VIP on 18082, 443 or 9000
// takes its cap_tcp chain to the blackhole cluster (closed, never passed through in plaintext);
// its HTTP is built as ever.
func NoIssuer() model.Mesh { return noIssuer().Mesh() }

func noIssuer() Scenario {
	s := simple("8080", "8080,9090=h2,9000=tcp,443=tcp", "")
	s.Issuer = workloadidentity.NoIssuer
	return s
}

// SharedPort is the mesh where one port is TCP on one VIP and HTTP on another: payments
// declares 8080 (primary) and 9000=tcp, catalog serves HTTP on 9000. A listener filter is skipped
// by destination port only, so 9000 keeps the inspectors for both VIPs: a late HTTP client of
// catalog:9000 is served by catalog's own HCM chain, and a server-first client of payments:9000
// waits the inspectors' timeout, as on no port the mesh knows as TCP alone.
func SharedPort() model.Mesh { return sharedPort().Mesh() }

func sharedPort() Scenario {
	s := simple("8080", "8080,9000=tcp", "")
	s.Services = append(s.Services, ServiceDecl{shop, catalogService, catalogVIP})
	s.Workloads = append(s.Workloads, Workload{Namespace: shop, Service: catalogService, Name: catalogPod, Node: SameRegion,
		Address: catalogAddress, Port: "9000", Health: healthy, Created: at(9)})
	return s
}

// DualStack is the mesh of a dual-stack cluster where payments (HTTP 8080, h2 9090, TCP 9000) is
// IPv6: its Service's VIP and its pods' addresses (what their MeshEndpoints carry), while frontend
// is IPv4. Each local pod's capture rules redirect both families, IPv4 to 127.0.0.1:18001 and
// IPv6 to [::1]:18001, so its capture listener listens on both; payments' pods are dialled by
// their IPv6 addresses, frontend's by its IPv4 one, and each inbound listener takes both families.
func DualStack() model.Mesh { return dualStack().Mesh() }

func dualStack() Scenario {
	s := simple("8080", "8080,9090=h2,9000=tcp", "")
	s.Services[0].VIP = "fd00:10:96::10"
	for i, address := range []string{"fd00:10:244:1::10", "fd00:10:244:2::10", "fd00:10:244:3::10"} {
		s.Workloads[i].Address = address
	}
	return s
}

// UDS is the mesh where payments serves HTTP 8080 (primary), h2 9090 and TCP 9000, and its pod
// on this node serves them all on one Unix socket (endpoint.aether.io/uds-socket: uds/app.sock):
// its inbound delivers every port to /run/aether/uds/uid-payments-0/app.sock instead of its
// address; its peers on other nodes, and what callers see, are unchanged.
func UDS() model.Mesh { return uds().Mesh() }

func uds() Scenario {
	s := simple("8080", "8080,9090=h2,9000=tcp", "")
	s.Workloads[0].UDSSocket = "uds/app.sock"
	return s
}

// DeclaredUpstreams is the routed mesh (Routes) with catalog beside it (HTTP 8080, TCP 5432,
// one pod in the same region), on a node that carries declared upstreams only
// (model.UpstreamsDeclared), where frontend declares config.aether.io/upstreams "payments.shop".
// frontend's identity carries its own service, payments, and payments-canary (a backend of
// payments' routes); payments' identity carries its own service and payments-canary. Nothing
// carries catalog: its virtual hosts and capture chains still name its clusters, which Envoy
// fetches on demand (the capture and proxy HCMs run the on-demand filter, catalog's tcp_proxy
// chains have on_demand).
func DeclaredUpstreams() model.Mesh { return declaredUpstreams().Mesh() }

func declaredUpstreams() Scenario {
	s := routes()
	s.Upstreams = model.UpstreamsDeclared
	s.Services = append(s.Services, ServiceDecl{shop, catalogService, catalogVIP})
	s.Workloads = append(s.Workloads, Workload{Namespace: shop, Service: catalogService, Name: catalogPod, Node: SameRegion,
		Address: catalogAddress, Port: "8080", Ports: "8080,5432=tcp", Health: healthy, Created: at(9)})
	for i, w := range s.Workloads {
		if w.Service == frontendService {
			s.Workloads[i].Upstreams = "payments.shop"
		}
	}
	return s
}

// OnDemand is DeclaredUpstreams after frontend asked for catalog on demand: the agent's answer
// carries catalog's clusters for frontend's identity alone, and its load assignments; the
// listeners and routes are DeclaredUpstreams' byte for byte.
func OnDemand() model.Mesh { return onDemand().Mesh() }

func onDemand() Scenario {
	s := declaredUpstreams()
	s.Demanded = map[string][]string{Identity(web, frontendService): {catalogService + "." + shop}}
	return s
}

// UnlabelledNodes is the common cast (payments HTTP 8080 on each node) where this node and node-b
// carry no topology labels and node-c (another region) does: this node's frontend has no place to
// prefer, so payments' load assignment is one priority holding all three pods (a node without
// labels expresses no preference: it is no neighbour of another unlabelled node). From node-c,
// the pods on the unlabelled nodes are elsewhere.
func UnlabelledNodes() model.Mesh { return unlabelledNodes().Mesh() }

func unlabelledNodes() Scenario {
	s := simple("8080", "8080", "")
	s.Unlabelled = []string{ThisNode, SameRegion}
	return s
}

// ActiveHealth is the common cast with payments serving HTTP 8080 (primary) and TCP 9000, its
// pods asking the clients to probe them (health-check-mode active, health path /healthz): every
// payments cluster probes the primary, the TCP ones through a transport socket of their own with
// the primary's SNI, and ejects outliers.
func ActiveHealth() model.Mesh { return activeHealth().Mesh() }

func activeHealth() Scenario {
	s := simple("8080", "8080,9000=tcp", "")
	for i := range s.Workloads {
		if s.Workloads[i].Service == paymentsService {
			s.Workloads[i].HealthCheckMode, s.Workloads[i].HealthPath = "active", "/healthz"
		}
	}
	return s
}

// HTTP3Hop is the mesh where payments serves HTTP 8080 (primary), h2 9090 and TCP 9000, and
// the node's proxy prefers HTTP/3 on the hop (model.Mesh.HopHTTP3, the agent's --hop-http3):
// payments-0's inbound also listens for QUIC on UDP 18008, with an HTTP/3 chain per HTTP port
// beside the TCP chains, and every HTTP cluster tries HTTP/3 first, HTTP/2 over TLS after it. The
// TCP port rides TLS over TCP as ever.
func HTTP3Hop() model.Mesh { return http3Hop().Mesh() }

func http3Hop() Scenario {
	s := simple("8080", "8080,9090=h2,9000=tcp", "")
	s.HopHTTP3 = true
	return s
}

// Scenarios are every scenario as data, by the name of its golden directory.
func Scenarios() map[string]Scenario {
	return map[string]Scenario{
		"access-policy":              accessPolicy(),
		"pure-http":                  pureHTTP(),
		"pure-tcp":                   pureTCP(),
		"mixed-http-primary":         mixedHTTPPrimary(),
		"tcp-primary-http-secondary": tcpPrimaryHTTPSecondary(),
		"no-http-port":               noHTTPPort(),
		"http-80":                    http80(),
		"https-443-tcp":              https443TCP(),
		"scoped":                     scoped(),
		"rollout-conflict":           rolloutConflict(),
		"primary-rollout":            primaryRollout(),
		"routes":                     routes(),
		"tls-routes":                 tlsRoutes(),
		"no-issuer":                  noIssuer(),
		"shared-port":                sharedPort(),
		"dual-stack-mesh":            dualStack(),
		"subsets":                    subsets(),
		"uds":                        uds(),
		"declared-upstreams":         declaredUpstreams(),
		"on-demand":                  onDemand(),
		"unlabelled-nodes":           unlabelledNodes(),
		"active-health":              activeHealth(),
		"udp-ports":                  udpPorts(),
		"http3-hop":                  http3Hop(),
	}
}

// All is every scenario's mesh, by the name of its golden directory.
func All() map[string]model.Mesh {
	out := map[string]model.Mesh{}
	for name, s := range Scenarios() {
		out[name] = s.Mesh()
	}
	return out
}

// The access-policy scenario's cast beyond frontend and payments: batch (namespace ops), a
// second client on this node, of another identity.
const (
	opsNamespace, batchService = "ops", "batch"
	batchVIP, batchAddress     = "10.96.0.30", "10.244.1.30"
)

// AccessPolicy is the mesh where AccessPolicies govern two of payments' ports: HTTP 8080 (its
// primary) admits GET under /api from web/frontend alone; TCP 9000 admits every identity of
// namespace web; h2 9090 is open. payments has one pod, on this node; frontend and batch (ops),
// its two clients, run beside it.
func AccessPolicy() model.Mesh { return accessPolicy().Mesh() }

func accessPolicy() Scenario {
	s := simple("8080", "8080,9090=h2,9000=tcp", "")
	s.Workloads = slices.DeleteFunc(s.Workloads, func(w Workload) bool { return w.Service == paymentsService && w.Node != ThisNode })
	s.Services = append(s.Services, ServiceDecl{opsNamespace, batchService, batchVIP})
	s.Workloads = append(s.Workloads, Workload{Namespace: opsNamespace, Service: batchService, Name: "batch-0", Node: ThisNode,
		Address: batchAddress, Port: "8080", Health: healthy, Created: at(8)})
	s.Policies = AccessPolicies()
	return s
}

// AccessPolicies are the access-policy scenario's policies (namespace shop).
func AccessPolicies() []configv1.AccessPolicy {
	target := &configv1.TargetRef{Kind: "Service", Name: paymentsService}
	return []configv1.AccessPolicy{
		{ObjectMeta: metav1.ObjectMeta{Namespace: shop, Name: "payments-api"}, Spec: configv1.AccessPolicySpec{
			TargetRef: target, Ports: []int32{8080},
			Rules: []configv1.AccessRule{{From: []configv1.AccessSource{{ServiceAccount: &configv1.ServiceAccountRef{Namespace: web, Name: frontendService}}},
				Methods: []string{"GET"}, PathPrefixes: []string{"/api"}}},
		}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: shop, Name: "payments-tcp"}, Spec: configv1.AccessPolicySpec{
			TargetRef: target, Ports: []int32{9000},
			Rules: []configv1.AccessRule{{From: []configv1.AccessSource{{Namespace: web}}}},
		}},
	}
}
