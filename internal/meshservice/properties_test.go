// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package meshservice_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/golden"
	"github.com/aether-mesh/aether-operator/internal/meshservice"
)

// endpoint builds a MeshEndpoint of service payments in shop. ports are "8080/HTTP" spellings,
// given sorted; created is RFC 3339.
func endpoint(t testing.TB, name, created string, primary int32, health meshv1alpha1.Health, ports ...string) meshv1alpha1.MeshEndpoint {
	t.Helper()
	ep := meshv1alpha1.MeshEndpoint{}
	ep.APIVersion, ep.Kind = meshv1alpha1.GroupVersion.String(), "MeshEndpoint"
	ep.Name, ep.Namespace = name, "shop"
	setCreated(t, &ep, created)
	ep.Spec = meshv1alpha1.MeshEndpointSpec{ServiceName: "payments", PodName: name, PodUID: "uid-" + name,
		NodeName: "node-a", Address: "10.244.1.10", PrimaryPort: primary, Weight: 1024}
	for _, p := range ports {
		number, protocol, ok := strings.Cut(p, "/")
		n, err := strconv.ParseInt(number, 10, 32)
		if !ok || err != nil {
			t.Fatalf("port %q: want <port>/<protocol>", p)
		}
		ep.Spec.Ports = append(ep.Spec.Ports, meshv1alpha1.PortProtocol{Port: int32(n), Protocol: meshv1alpha1.Protocol(protocol)})
	}
	ep.Spec.PortsSummary = meshv1alpha1.FormatPorts(ep.Spec.Ports)
	ep.Status.Health = health
	return ep
}

// setCreated sets metadata.creationTimestamp the way the API decodes it.
func setCreated(t testing.TB, ep *meshv1alpha1.MeshEndpoint, rfc3339 string) {
	t.Helper()
	if err := json.Unmarshal([]byte(strconv.Quote(rfc3339)), &ep.CreationTimestamp); err != nil {
		t.Fatalf("creationTimestamp %q: %v", rfc3339, err)
	}
}

// baseInput is the service of the golden cases with the given endpoints.
func baseInput(endpoints ...meshv1alpha1.MeshEndpoint) meshservice.Input {
	return meshservice.Input{Namespace: "shop", Name: "payments", UID: "3b0d7c62-5a1e-4f0b-9d7e-2f6c1a8e4b10",
		MeshDomain: "aether.internal", Endpoints: endpoints,
		Service: meshservice.ServiceFacts{Exists: true, Owned: true, ClusterIP: "10.96.0.10"}}
}

func mustTranslate(t testing.TB, in meshservice.Input) meshservice.Output {
	t.Helper()
	out, err := meshservice.Translate(in)
	if err != nil {
		t.Fatalf("Translate: %v", err)
	}
	return out
}

// sameOutput is the comparison of the order-independence test: byte equality of the marshalled
// Outputs, with a diff when they differ.
func sameOutput(want, got []byte) (bool, string) {
	if bytes.Equal(want, got) {
		return true, ""
	}
	return false, golden.Diff(string(want), string(got))
}

// permutations calls f with every ordering of 0..n-1 (Heap's algorithm).
func permutations(n int, f func([]int)) {
	p := make([]int, n)
	for i := range p {
		p[i] = i
	}
	c := make([]int, n)
	f(slices.Clone(p))
	for i := 0; i < n; {
		if c[i] < i {
			if i%2 == 0 {
				p[0], p[i] = p[i], p[0]
			} else {
				p[c[i]], p[i] = p[i], p[c[i]]
			}
			f(slices.Clone(p))
			c[i]++
			i = 0
		} else {
			c[i] = 0
			i++
		}
	}
}

func names(endpoints []meshv1alpha1.MeshEndpoint) []string {
	out := make([]string, len(endpoints))
	for i, ep := range endpoints {
		out[i] = ep.Name
	}
	return out
}

func TestPermutations(t *testing.T) {
	seen := map[string]bool{}
	permutations(4, func(p []int) { seen[fmt.Sprint(p)] = true })
	if len(seen) != 24 {
		t.Errorf("permutations(4) produced %d distinct orderings, want 24", len(seen))
	}
}

// TestOrderIndependence: the Output never depends on the order of the endpoints (DESIGN 4:
// conflicts are resolved deterministically and order-independently). Every permutation for up to
// four endpoints, else 20 seeded shuffles; the marshalled Outputs must be byte-identical.
func TestOrderIndependence(t *testing.T) {
	type tc struct {
		name string
		in   meshservice.Input
	}
	var cases []tc
	for _, name := range []string{"pure-http", "mixed", "rollout-conflict", "conflict-tie-newer-wins",
		"no-ready-endpoints", "primary-vote", "primary-vote-tie", "ports-over-cap"} {
		cases = append(cases, tc{name, readInput(t, name)})
	}
	// Every tie-breaker down to the last: equal ready counts and equal creation times, so the
	// protocol's name decides port 9000 and the lower port the primary.
	cases = append(cases, tc{"full-tie", baseInput(
		endpoint(t, "payments-a", "2026-05-01T09:00:00Z", 8080, meshv1alpha1.HealthHealthy, "8080/HTTP", "9000/TCP"),
		endpoint(t, "payments-b", "2026-05-01T09:00:00Z", 9000, meshv1alpha1.HealthHealthy, "8080/HTTP", "9000/HTTP"),
		endpoint(t, "payments-c", "2026-05-01T09:00:00Z", 9000, meshv1alpha1.HealthPending, "8080/HTTP", "9000/HTTP2"),
		endpoint(t, "payments-d", "2026-05-01T09:00:00Z", 8080, meshv1alpha1.HealthUnhealthy, "8080/HTTP", "9000/HTTP2"),
	)})
	// Port 9000's ready counts tie 1-1 and each protocol has two members: the declaration whose
	// newest member is younger wins (HTTP, by its pending 12:00 endpoint), not the first or last
	// seen, in the given order or by name.
	cases = append(cases, tc{"tie-newest-member", baseInput(
		endpoint(t, "payments-a", "2026-05-01T12:00:00Z", 8080, meshv1alpha1.HealthPending, "8080/HTTP", "9000/HTTP"),
		endpoint(t, "payments-b", "2026-05-01T08:00:00Z", 8080, meshv1alpha1.HealthHealthy, "8080/HTTP", "9000/HTTP"),
		endpoint(t, "payments-c", "2026-05-01T10:30:00Z", 8080, meshv1alpha1.HealthPending, "8080/HTTP", "9000/TCP"),
		endpoint(t, "payments-d", "2026-05-01T10:00:00Z", 8080, meshv1alpha1.HealthHealthy, "8080/HTTP", "9000/TCP"),
	)})
	// More than four endpoints: a rollout of three port layouts, mixed health, repeated timestamps.
	cases = append(cases, tc{"rollout-7", baseInput(
		endpoint(t, "payments-v1-a", "2026-05-01T08:00:00Z", 8080, meshv1alpha1.HealthHealthy, "8080/HTTP", "9000/HTTP"),
		endpoint(t, "payments-v1-b", "2026-05-01T08:00:00Z", 8080, meshv1alpha1.HealthDraining, "8080/HTTP", "9000/HTTP"),
		endpoint(t, "payments-v2-a", "2026-05-01T09:00:00Z", 9000, meshv1alpha1.HealthHealthy, "5432/TCP", "8080/HTTP", "9000/TCP"),
		endpoint(t, "payments-v2-b", "2026-05-01T09:00:00Z", 9000, meshv1alpha1.HealthUnhealthy, "5432/TCP", "8080/HTTP", "9000/TCP"),
		endpoint(t, "payments-v3-a", "2026-05-01T10:00:00Z", 9000, meshv1alpha1.HealthPending, "5432/HTTP2", "8080/HTTP", "9000/TCP"),
		endpoint(t, "payments-v3-b", "2026-05-01T10:00:00Z", 8080, meshv1alpha1.HealthHealthy, "5432/HTTP2", "8080/HTTP", "9000/TCP"),
		endpoint(t, "payments-v3-c", "2026-05-01T10:30:00Z", 8080, meshv1alpha1.HealthHealthy, "80/HTTP", "8080/HTTP", "9000/TCP"),
	)})

	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want := marshal(t, mustTranslate(t, c.in))
			check := func(order []int) {
				t.Helper()
				in := c.in
				in.Endpoints = make([]meshv1alpha1.MeshEndpoint, len(order))
				for i, j := range order {
					in.Endpoints[i] = c.in.Endpoints[j]
				}
				before := names(in.Endpoints)
				got := marshal(t, mustTranslate(t, in))
				if same, diff := sameOutput(want, got); !same {
					t.Fatalf("case %s: endpoints in the order %v give a different Output (-original order +this order):\n%s",
						c.name, before, diff)
				}
				if after := names(in.Endpoints); !slices.Equal(before, after) {
					t.Fatalf("case %s: Translate reordered the caller's endpoints: %v became %v", c.name, before, after)
				}
			}
			if n := len(c.in.Endpoints); n <= 4 {
				runs := 0
				permutations(n, func(order []int) { check(order); runs++ })
				t.Logf("%d permutations", runs)
				return
			}
			rng := rand.New(rand.NewPCG(20260501, 1))
			for range 20 {
				check(rng.Perm(len(c.in.Endpoints)))
			}
		})
	}

	t.Run("tie-newest-member winner", func(t *testing.T) {
		st := mustTranslate(t, cases[len(cases)-2].in).Status
		if got := st.Ports[1]; got.Port != 9000 || got.Protocol != meshv1alpha1.ProtocolHTTP || got.Endpoints != 2 {
			t.Errorf("port %d reported %s with %d endpoints, want 9000 HTTP with 2: ready counts tie 1-1 and HTTP's "+
				"newest endpoint (12:00) is younger than TCP's (10:30)", got.Port, got.Protocol, got.Endpoints)
		}
	})
	t.Run("full-tie winners", func(t *testing.T) {
		st := mustTranslate(t, cases[len(cases)-3].in).Status
		if st.PrimaryPort != 8080 {
			t.Errorf("primaryPort %d, want 8080: a 2-2 vote with equal creation times goes to the lower port", st.PrimaryPort)
		}
		if got := st.Ports[1]; got.Port != 9000 || got.Protocol != meshv1alpha1.ProtocolHTTP {
			t.Errorf("port %d reported %s, want 9000 HTTP: HTTP and TCP each have 1 ready endpoint (HTTP2 none) "+
				"and the same creation time, so the protocol's name decides (HTTP < TCP)", got.Port, got.Protocol)
		}
	})
}

// TestOrderIndependenceCanFail is the negative control: the comparison TestOrderIndependence
// relies on does see a change that matters.
func TestOrderIndependenceCanFail(t *testing.T) {
	t.Run("one endpoint's health", func(t *testing.T) {
		in := readInput(t, "mixed")
		want := marshal(t, mustTranslate(t, in))
		changed := in
		changed.Endpoints = slices.Clone(in.Endpoints)
		changed.Endpoints[1].Status.Health = meshv1alpha1.HealthUnhealthy
		got := marshal(t, mustTranslate(t, changed))
		same, diff := sameOutput(want, got)
		if same {
			t.Fatal("marking one endpoint Unhealthy left the Output byte-identical: the comparison cannot fail")
		}
		for _, line := range []string{"+   endpointsSummary: 2/3", "+     message: 2 of 3 endpoints are ready"} {
			if !strings.Contains(diff, line) {
				t.Errorf("the diff lacks %q:\n%s", line, diff)
			}
		}
		if in.Endpoints[1].Status.Health != meshv1alpha1.HealthHealthy {
			t.Fatal("the control changed the shared input")
		}
	})
	t.Run("the newer declaration's age", func(t *testing.T) {
		// conflict-tie-newer-wins: TCP wins port 9000 only by being declared later. Make its
		// endpoint the oldest and HTTP wins instead.
		in := readInput(t, "conflict-tie-newer-wins")
		want := marshal(t, mustTranslate(t, in))
		changed := in
		changed.Endpoints = slices.Clone(in.Endpoints)
		i := slices.IndexFunc(changed.Endpoints, func(ep meshv1alpha1.MeshEndpoint) bool {
			return slices.Contains(ep.Spec.Ports, meshv1alpha1.PortProtocol{Port: 9000, Protocol: meshv1alpha1.ProtocolTCP})
		})
		setCreated(t, &changed.Endpoints[i], "2026-05-01T08:00:00Z")
		out := mustTranslate(t, changed)
		if same, _ := sameOutput(want, marshal(t, out)); same {
			t.Fatal("making the TCP declaration the older left the Output byte-identical")
		}
		if got := out.Status.Ports[1]; got.Port != 9000 || got.Protocol != meshv1alpha1.ProtocolHTTP || got.Endpoints != 2 {
			t.Errorf("port %d reported %s with %d endpoints, want 9000 HTTP with 2: ready counts tie 1-1, HTTP is now the newer declaration",
				got.Port, got.Protocol, got.Endpoints)
		}
	})
}

// TestScaleToZeroKeepsSurface: when the last endpoint goes away, the last status keeps the
// service's ports and primary, so its defaults, dial surface, VIP and generated Service do not
// change; when endpoints return the last status is ignored.
func TestScaleToZeroKeepsSurface(t *testing.T) {
	for _, name := range goldenCases(t) {
		in := readInput(t, name)
		if len(in.Endpoints) == 0 {
			continue
		}
		t.Run(name, func(t *testing.T) {
			up := mustTranslate(t, in)
			zero := in
			zero.Endpoints = nil
			zero.LastStatus = up.Status
			down := mustTranslate(t, zero)

			type surface struct {
				PrimaryPort     int32
				PortsSummary    string
				DefaultHTTPPort *int32
				DefaultTCPPort  *int32
				DialSurface     []meshv1alpha1.Dial
				VIP             string
				Identity        string
			}
			of := func(st meshv1alpha1.MeshServiceStatus) []byte {
				return must(yaml.Marshal(surface{st.PrimaryPort, st.PortsSummary, st.DefaultHTTPPort, st.DefaultTCPPort,
					st.DialSurface, st.VIP, st.Identity}))
			}
			if same, diff := sameOutput(of(up.Status), of(down.Status)); !same {
				t.Errorf("case %s: scaling to zero changed the surface (-with endpoints +without):\n%s", name, diff)
			}
			if same, diff := sameOutput(must(yaml.Marshal(up.Service)), must(yaml.Marshal(down.Service))); !same {
				t.Errorf("case %s: scaling to zero changed the generated Service (-with endpoints +without):\n%s", name, diff)
			}
			if len(down.Status.Ports) != len(up.Status.Ports) {
				t.Fatalf("case %s: %d ports kept, want %d", name, len(down.Status.Ports), len(up.Status.Ports))
			}
			for i, p := range down.Status.Ports {
				if p.Port != up.Status.Ports[i].Port || p.Protocol != up.Status.Ports[i].Protocol || p.Endpoints != 0 {
					t.Errorf("case %s: kept port %d/%s with %d endpoints, want %d/%s with 0", name, p.Port, p.Protocol, p.Endpoints,
						up.Status.Ports[i].Port, up.Status.Ports[i].Protocol)
				}
			}
			if c := condition(down.Status, meshv1alpha1.ServiceConditionReady); c.Status != "False" || c.Reason != meshv1alpha1.ServiceReasonNoEndpoints {
				t.Errorf("case %s: Ready %s/%s, want False/NoEndpoints", name, c.Status, c.Reason)
			}

			// Endpoints return: the last status (even the scaled-down one) is not consulted.
			back := in
			back.LastStatus = down.Status
			if same, diff := sameOutput(marshal(t, up), marshal(t, mustTranslate(t, back))); !same {
				t.Errorf("case %s: with endpoints, the last status changed the Output (-without +with a last status):\n%s", name, diff)
			}
		})
	}
}

func condition(st meshv1alpha1.MeshServiceStatus, typ string) struct{ Status, Reason string } {
	for _, c := range st.Conditions {
		if c.Type == typ {
			return struct{ Status, Reason string }{string(c.Status), c.Reason}
		}
	}
	return struct{ Status, Reason string }{"(absent)", ""}
}

func must(data []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return data
}

// oddEndpoints say everything a MeshEndpoint's author might hope ends up in the Service: a
// foreign namespace, labels and annotations of Services and load balancers, metadata keys named
// like Service fields, public and unspecified addresses, another service's name.
const oddEndpoints = `
- metadata:
    name: payments-odd-1
    namespace: kube-system
    creationTimestamp: "2026-05-01T09:00:00Z"
    labels:
      app: payments
      kubernetes.io/service-name: payments
      aether.io/generated: "false"
    annotations:
      service.beta.kubernetes.io/aws-load-balancer-type: nlb
      metallb.universe.tf/loadBalancerIPs: 203.0.113.10
      aether.io/app-protocol: grpc
      aether.io/port-protocols: 1=udp
    ownerReferences:
    - {apiVersion: v1, kind: Service, name: payments, uid: 11111111-2222-3333-4444-555555555555, controller: true}
    finalizers: [example.com/keep]
  spec:
    serviceName: other
    podName: payments-odd-1
    podUID: u1
    nodeName: node-x
    address: 203.0.113.7
    primaryPort: 443
    ports:
    - {port: 1, protocol: TCP}
    - {port: 80, protocol: TCP}
    - {port: 443, protocol: HTTP}
    - {port: 30080, protocol: TCP}
    - {port: 65535, protocol: HTTP2}
    weight: 65535
    metadata:
      selector: app-payments
      externalips: 203.0.113.8
      loadbalancerip: 203.0.113.9
      type: LoadBalancer
      nodeport: "30080"
    locality: {region: "", zone: "kube-system"}
  status:
    health: Healthy
- metadata:
    name: payments-odd-2
    namespace: default
    creationTimestamp: "2026-05-01T10:00:00Z"
    labels: {app.kubernetes.io/name: evil}
  spec:
    serviceName: payments
    podName: payments-odd-2
    podUID: u2
    nodeName: node-y
    address: "::"
    primaryPort: 80
    ports:
    - {port: 80, protocol: HTTP}
    - {port: 443, protocol: TCP}
    metadata: {namespace-override: kube-system, externalname: evil.example.com}
  status:
    health: Draining
- metadata:
    name: payments-odd-3
    creationTimestamp: "2026-05-01T11:00:00Z"
  spec:
    serviceName: payments
    podName: payments-odd-3
    podUID: u3
    nodeName: node-z
    address: 0.0.0.0
    primaryPort: 18000
    ports:
    - {port: 18000, protocol: TCP}
  status:
    health: Unhealthy
`

// TestServiceConfinement: only the ports' numbers and protocols come from endpoints; the
// generated Service never carries a selector, external IPs, load-balancer fields, node ports or
// a namespace other than the input's, whatever the endpoints say.
func TestServiceConfinement(t *testing.T) {
	var odd []meshv1alpha1.MeshEndpoint
	if err := yaml.UnmarshalStrict([]byte(oddEndpoints), &odd); err != nil {
		t.Fatal(err)
	}
	t.Run("odd endpoints", func(t *testing.T) {
		for _, ns := range []string{"shop", "team-a"} {
			in := baseInput(odd...)
			in.Namespace = ns
			out := mustTranslate(t, in)
			checkConfined(t, in, out)
			if got := out.Service.Annotations[meshservice.AnnotationPortProtocols]; got != "1=tcp,80=tcp,443=http,18000=tcp,30080=tcp,65535=http2" {
				t.Errorf("port-protocols %q: not the merged ports", got)
			}
		}
	})
	t.Run("golden cases", func(t *testing.T) {
		for _, name := range goldenCases(t) {
			in := readInput(t, name)
			checkConfined(t, in, mustTranslate(t, in))
		}
	})
	t.Run("random endpoints", func(t *testing.T) {
		rng := rand.New(rand.NewPCG(42, 7))
		for i := range 300 {
			in := randomInput(t, rng, odd)
			out := mustTranslate(t, in)
			t.Run(fmt.Sprint(i), func(t *testing.T) {
				checkConfined(t, in, out)
				checkStatus(t, in, out.Status)
				shuffled := in
				shuffled.Endpoints = slices.Clone(in.Endpoints)
				rng.Shuffle(len(shuffled.Endpoints), func(a, b int) {
					shuffled.Endpoints[a], shuffled.Endpoints[b] = shuffled.Endpoints[b], shuffled.Endpoints[a]
				})
				if same, diff := sameOutput(marshal(t, out), marshal(t, mustTranslate(t, shuffled))); !same {
					t.Errorf("shuffling the endpoints changed the Output:\n%s", diff)
				}
			})
		}
	})
}

// randomInput is a service of 1..6 endpoints drawn from small pools (so that ports, protocols,
// primaries and creation times collide), each carrying the metadata of one of the odd endpoints.
func randomInput(t testing.TB, rng *rand.Rand, odd []meshv1alpha1.MeshEndpoint) meshservice.Input {
	pool := []int32{1, 80, 443, 5432, 8080, 9000, 9090, 65535}
	protocols := []meshv1alpha1.Protocol{meshv1alpha1.ProtocolHTTP, meshv1alpha1.ProtocolHTTP2, meshv1alpha1.ProtocolTCP, meshv1alpha1.ProtocolUDP}
	healths := []meshv1alpha1.Health{meshv1alpha1.HealthPending, meshv1alpha1.HealthHealthy, meshv1alpha1.HealthUnhealthy,
		meshv1alpha1.HealthDraining, ""}
	facts := []meshservice.ServiceFacts{{Exists: true, Owned: true, ClusterIP: "10.96.0.10"}, {},
		{Exists: true, Owned: false, ClusterIP: "10.96.0.99"}}
	in := baseInput()
	in.Namespace = []string{"shop", "team-a", "x"}[rng.IntN(3)]
	in.Name = []string{"payments", "db", "a-b"}[rng.IntN(3)]
	in.Service = facts[rng.IntN(len(facts))]
	for i := range 1 + rng.IntN(6) {
		ep := odd[rng.IntN(len(odd))]
		ep.Name = fmt.Sprintf("%s-%d", in.Name, i)
		setCreated(t, &ep, time.Date(2026, 5, 1, 9+rng.IntN(3), 0, 0, 0, time.UTC).Format(time.RFC3339))
		ep.Status.Health = healths[rng.IntN(len(healths))]
		numbers := slices.Clone(pool)
		rng.Shuffle(len(numbers), func(a, b int) { numbers[a], numbers[b] = numbers[b], numbers[a] })
		numbers = numbers[:1+rng.IntN(4)]
		slices.Sort(numbers)
		ep.Spec.Ports = nil
		for _, n := range numbers {
			ep.Spec.Ports = append(ep.Spec.Ports, meshv1alpha1.PortProtocol{Port: n, Protocol: protocols[rng.IntN(len(protocols))]})
		}
		ep.Spec.PrimaryPort = numbers[rng.IntN(len(numbers))]
		ep.Spec.PortsSummary = meshv1alpha1.FormatPorts(ep.Spec.Ports)
		in.Endpoints = append(in.Endpoints, ep)
	}
	return in
}

var portName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// checkConfined checks the generated Service is the one DESIGN 5 describes and nothing else.
func checkConfined(t *testing.T, in meshservice.Input, out meshservice.Output) {
	t.Helper()
	svc := out.Service
	if in.Service.Exists && !in.Service.Owned {
		if svc != nil {
			t.Errorf("a Service %s/%s exists that is not ours, yet the Output applies one", in.Namespace, in.Name)
		}
		// Only an adoptable one (a user's ClusterIP Service that selects exactly the service's
		// pods) gives its cluster IP as the VIP; it is still never written.
		adoptable := in.Service.Existing != nil && meshservice.Adoptable(in.Name, in.Service.Existing, in.Endpoints) == ""
		if vip := out.Status.VIP; (vip != "") != adoptable || (adoptable && vip != in.Service.Existing.ClusterIP) {
			t.Errorf("vip %q of a Service that is not ours (adoptable: %v)", vip, adoptable)
		}
		return
	}
	if svc == nil {
		t.Fatalf("no generated Service (facts %+v)", in.Service)
	}
	if deref(svc.Namespace) != in.Namespace || deref(svc.Name) != in.Name {
		t.Errorf("Service %s/%s, want %s/%s", deref(svc.Namespace), deref(svc.Name), in.Namespace, in.Name)
	}
	if deref(svc.Kind) != "Service" || deref(svc.APIVersion) != "v1" {
		t.Errorf("Service kind %q apiVersion %q", deref(svc.Kind), deref(svc.APIVersion))
	}
	if want := map[string]string{meshservice.LabelGenerated: "true"}; !maps.Equal(svc.Labels, want) {
		t.Errorf("labels %v, want %v", svc.Labels, want)
	}
	if keys := slices.Sorted(maps.Keys(svc.Annotations)); !slices.Equal(keys, []string{meshservice.AnnotationAppProtocol, meshservice.AnnotationPortProtocols}) {
		t.Errorf("annotations %v, want only %s and %s", svc.Annotations, meshservice.AnnotationAppProtocol, meshservice.AnnotationPortProtocols)
	}
	if len(svc.OwnerReferences) != 1 {
		t.Errorf("ownerReferences %d, want 1 (the MeshService)", len(svc.OwnerReferences))
	} else if o := svc.OwnerReferences[0]; deref(o.Kind) != "MeshService" || deref(o.Name) != in.Name || deref(o.UID) != in.UID ||
		deref(o.APIVersion) != meshv1alpha1.GroupVersion.String() || o.Controller == nil || !*o.Controller {
		t.Errorf("ownerReference %s %s/%s uid %s controller %v, want the MeshService %s uid %s",
			deref(o.APIVersion), deref(o.Kind), deref(o.Name), deref(o.UID), o.Controller, in.Name, in.UID)
	}
	if svc.Status != nil {
		t.Error("the apply configuration carries a status")
	}
	spec := svc.Spec
	if spec == nil {
		t.Fatal("no spec")
	}
	switch {
	case spec.Selector != nil:
		t.Errorf("selector %v: the generated Service is selectorless", spec.Selector)
	case spec.ExternalIPs != nil:
		t.Errorf("externalIPs %v", spec.ExternalIPs)
	case spec.LoadBalancerIP != nil || spec.LoadBalancerSourceRanges != nil || spec.LoadBalancerClass != nil ||
		spec.AllocateLoadBalancerNodePorts != nil || spec.HealthCheckNodePort != nil:
		t.Error("load-balancer fields set")
	case spec.ExternalName != nil || spec.ExternalTrafficPolicy != nil:
		t.Error("externalName or externalTrafficPolicy set")
	case spec.ClusterIP != nil || spec.ClusterIPs != nil:
		t.Errorf("clusterIP set: the API server allocates it")
	case spec.Type == nil || string(*spec.Type) != "ClusterIP":
		t.Errorf("type %v, want ClusterIP", spec.Type)
	case deref(spec.SessionAffinity) != "None" || deref(spec.InternalTrafficPolicy) != "Cluster" || deref(spec.IPFamilyPolicy) != "SingleStack":
		// The API server's defaults for a ClusterIP Service, stated so that the whole live spec
		// can be compared with this one.
		t.Errorf("sessionAffinity %v internalTrafficPolicy %v ipFamilyPolicy %v, want None, Cluster, SingleStack",
			spec.SessionAffinity, spec.InternalTrafficPolicy, spec.IPFamilyPolicy)
	}

	// Whatever fields the apply configuration gains, only these may be set.
	var object map[string]map[string]any
	if err := json.Unmarshal(must(json.Marshal(struct {
		Metadata any `json:"metadata"`
		Spec     any `json:"spec"`
	}{svc.ObjectMetaApplyConfiguration, spec})), &object); err != nil {
		t.Fatal(err)
	}
	allowed := map[string][]string{
		"metadata": {"annotations", "labels", "name", "namespace", "ownerReferences"},
		"spec":     {"internalTrafficPolicy", "ipFamilyPolicy", "ports", "sessionAffinity", "type"},
	}
	for part, want := range allowed {
		if got := slices.Sorted(maps.Keys(object[part])); !slices.Equal(got, want) {
			t.Errorf("%s sets %v, want exactly %v", part, got, want)
		}
	}

	// Each declared port under its own transport: a UDP one as a UDP Service port, every other
	// as TCP; 18082 also as UDP exactly when the primary is UDP (<name>:18082/udp).
	declared := map[string]bool{}
	primaryUDP := false
	for _, p := range out.Status.Ports {
		declared[fmt.Sprintf("%d/%s", p.Port, transport(p.Protocol))] = true
		primaryUDP = primaryUDP || p.Port == out.Status.PrimaryPort && p.Protocol == meshv1alpha1.ProtocolUDP
	}
	seenNames := map[string]bool{}
	var numbers []int32
	var udp18082 bool
	for _, p := range spec.Ports {
		name, port := deref(p.Name), deref(p.Port)
		if p.Protocol != nil && *p.Protocol == "UDP" && port == meshv1alpha1.MeshTCPPort {
			udp18082 = true
			if name != "mesh-udp" {
				t.Errorf("port %s: 18082/UDP is named mesh-udp", name)
			}
			continue
		}
		wantProtocol := "TCP"
		if strings.HasPrefix(name, "udp-") {
			wantProtocol = "UDP"
		}
		switch {
		case p.NodePort != nil:
			t.Errorf("port %s has a nodePort", name)
		case p.Protocol == nil || string(*p.Protocol) != wantProtocol:
			t.Errorf("port %s: protocol %v, want %s", name, p.Protocol, wantProtocol)
		case p.TargetPort == nil || p.TargetPort.Type != 0 || p.TargetPort.IntVal != port:
			t.Errorf("port %s: targetPort %v, want %d", name, p.TargetPort, port)
		case len(name) > 15 || !portName.MatchString(name) || strings.Contains(name, "--") || seenNames[name]:
			t.Errorf("port name %q is not a unique IANA service name", name)
		}
		seenNames[name] = true
		numbers = append(numbers, port)
		delete(declared, fmt.Sprintf("%d/%s", port, wantProtocol))
	}
	if udp18082 != primaryUDP {
		t.Errorf("18082/UDP in the Service: %t; want it exactly when the primary is UDP (%t)", udp18082, primaryUDP)
	}
	if !slices.IsSorted(numbers) || len(slices.Compact(slices.Clone(numbers))) != len(numbers) {
		t.Errorf("Service ports %v are not sorted and unique", numbers)
	}
	for _, must := range []int32{80, 443, 18081, 18082} {
		if !slices.Contains(numbers, must) {
			t.Errorf("Service ports %v lack %d", numbers, must)
		}
	}
	if len(declared) > 0 {
		t.Errorf("declared ports %v have no Service port", slices.Sorted(maps.Keys(declared)))
	}
}

// checkStatus checks what the status must say whatever the endpoints.
func checkStatus(t *testing.T, in meshservice.Input, st meshv1alpha1.MeshServiceStatus) {
	t.Helper()
	var ready int32
	primaries := map[int32]bool{}
	declared := map[meshv1alpha1.PortProtocol]int32{}
	for _, ep := range in.Endpoints {
		if ep.Status.Health == meshv1alpha1.HealthHealthy {
			ready++
		}
		primaries[ep.Spec.PrimaryPort] = true
		for _, p := range ep.Spec.Ports {
			declared[p]++
		}
	}
	if st.Endpoints.Total != int32(len(in.Endpoints)) || st.Endpoints.Ready != ready {
		t.Errorf("endpoints %d/%d, want %d/%d", st.Endpoints.Ready, st.Endpoints.Total, ready, len(in.Endpoints))
	}
	if !primaries[st.PrimaryPort] {
		t.Errorf("primaryPort %d is no endpoint's primary", st.PrimaryPort)
	}
	for i, p := range st.Ports {
		if i > 0 && st.Ports[i-1].Port >= p.Port {
			t.Errorf("ports not sorted and unique at %d", p.Port)
		}
		if n := declared[meshv1alpha1.PortProtocol{Port: p.Port, Protocol: p.Protocol}]; n == 0 || n != p.Endpoints {
			t.Errorf("port %d/%s counts %d endpoints, %d declare it so", p.Port, p.Protocol, p.Endpoints, n)
		}
	}
	names := []string{in.Name + "." + in.Namespace + ".aether.internal", in.Name + "." + in.Namespace + ".svc.cluster.local", in.Name + "." + in.Namespace}
	if in.Service.Exists && !in.Service.Owned {
		names = names[:1] // the Kubernetes names belong to someone else's Service
	}
	if !slices.Equal(st.Names, names) {
		t.Errorf("names %q, want %q", st.Names, names)
	}
	// Each spelling once, relative to any of the names: 2 rows per port (Host: <name>:p and
	// <name>:p) and 10 fixed ones.
	if want := 2*len(st.Ports) + 10; len(st.DialSurface) != want {
		t.Errorf("%d dial rows, want %d (2 × %d ports + 10)", len(st.DialSurface), want, len(st.Ports))
	}
	seen := map[string]bool{}
	for _, d := range st.DialSurface {
		if seen[d.Address] || !strings.Contains(d.Address, "<name>") {
			t.Errorf("dial row %q is listed twice or names no <name>", d.Address)
		}
		seen[d.Address] = true
		if (d.Outcome == meshv1alpha1.DialMisdirected) != (d.Error != "") {
			t.Errorf("dial row %s: outcome %s with x-aether-error %q", d.Address, d.Outcome, d.Error)
		}
	}
	if want := "spiffe://aether.internal/ns/" + in.Namespace + "/sa/" + in.Name; st.Identity != want {
		t.Errorf("identity %q, want %q", st.Identity, want)
	}
}

func deref[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}

// TestTranslateRefuses: a mesh domain that is no trust domain, or a service with no SPIFFE ID,
// is an error naming it, and no Output.
func TestTranslateRefuses(t *testing.T) {
	for _, tc := range []struct {
		name   string
		edit   func(*meshservice.Input)
		quoted string // must appear in the error
	}{
		{"spaces and capitals", func(in *meshservice.Input) { in.MeshDomain = "Not A Domain" }, `"Not A Domain"`},
		{"capitals", func(in *meshservice.Input) { in.MeshDomain = "Aether.Internal" }, `"Aether.Internal"`},
		{"empty", func(in *meshservice.Input) { in.MeshDomain = "" }, `""`},
		{"with a port", func(in *meshservice.Input) { in.MeshDomain = "aether.internal:443" }, `"aether.internal:443"`},
		{"a SPIFFE ID, not a domain", func(in *meshservice.Input) { in.MeshDomain = "spiffe://aether.internal" }, `"spiffe://aether.internal"`},
		{"no name", func(in *meshservice.Input) { in.Name = "" }, "shop/"},
		{"no namespace", func(in *meshservice.Input) { in.Namespace = "" }, "/payments"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := readInput(t, "mixed")
			tc.edit(&in)
			out, err := meshservice.Translate(in)
			if err == nil {
				t.Fatalf("Translate accepted %s: identity %q, names %q", tc.name, out.Status.Identity, out.Status.Names)
			}
			if !strings.Contains(err.Error(), tc.quoted) {
				t.Errorf("error %q does not name %s", err, tc.quoted)
			}
			if out.Service != nil || out.Status.Identity != "" || out.Status.Names != nil || out.Status.DialSurface != nil {
				t.Errorf("an error with an Output: %+v", out)
			}
		})
	}
	t.Run("another valid domain", func(t *testing.T) {
		in := readInput(t, "mixed")
		in.MeshDomain = "mesh.example.com"
		st := mustTranslate(t, in).Status
		if st.Identity != "spiffe://mesh.example.com/ns/shop/sa/payments" || st.Names[0] != "payments.shop.mesh.example.com" {
			t.Errorf("identity %q, names %q", st.Identity, st.Names)
		}
	})
}

// transport is the Service port protocol a port of protocol p is carried on.
func transport(p meshv1alpha1.Protocol) string {
	if p == meshv1alpha1.ProtocolUDP {
		return "UDP"
	}
	return "TCP"
}
