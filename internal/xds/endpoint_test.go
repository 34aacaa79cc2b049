// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xds

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/model"
)

// clLoadAssignment is the load assignment named name.
func clLoadAssignment(t testing.TB, res Resources, name string) *endpointv3.ClusterLoadAssignment {
	t.Helper()
	i := slices.IndexFunc(res.Endpoints, func(cla *endpointv3.ClusterLoadAssignment) bool { return cla.ClusterName == name })
	if i < 0 {
		t.Fatalf("no load assignment %q", name)
	}
	return res.Endpoints[i]
}

// clHost is one host of a load assignment as the tests read it.
type clHost struct {
	address string
	health  corev3.HealthStatus
	weight  uint32
}

// clHosts are cla's hosts in order, every locality's in turn.
func clHosts(cla *endpointv3.ClusterLoadAssignment) []clHost {
	var out []clHost
	for _, l := range cla.GetEndpoints() {
		for _, e := range l.GetLbEndpoints() {
			a := e.GetEndpoint().GetAddress().GetSocketAddress()
			out = append(out, clHost{address: a.GetAddress() + ":" + strconv.Itoa(int(a.GetPortValue())),
				health: e.GetHealthStatus(), weight: e.GetLoadBalancingWeight().GetValue()})
		}
	}
	return out
}

func clAddresses(hosts []clHost) []string {
	out := make([]string, len(hosts))
	for i, h := range hosts {
		out[i] = h.address
	}
	return out
}

// clOneService is a mesh of service payments built from endpoints, dialed by one local pod.
func clOneService(t testing.TB, endpoints ...meshv1alpha1.MeshEndpoint) model.Mesh {
	return clMesh([]model.Service{clService(t, "payments", endpoints...)}, clPod(t, "web-1", "web", "10.244.1.7", "8080/HTTP"))
}

// TestTypedMembershipDuringAConflict: while endpoints disagree on port 9000's protocol, its load
// assignment lists only the members of the winning declaration, and only the winner's cluster
// exists. Flipping the vote flips both.
func TestTypedMembershipDuringAConflict(t *testing.T) {
	a := clEndpoint(t, "payments", "payments-a", "10.244.1.11", 8080, "8080/HTTP", "9000/TCP")
	b := clEndpoint(t, "payments", "payments-b", "10.244.1.12", 8080, "8080/HTTP", "9000/TCP")
	c := clEndpoint(t, "payments", "payments-c", "10.244.1.13", 8080, "8080/HTTP", "9000/HTTP")
	pay, web := FQDN("payments", "shop", clDomain), clIdentity("web")

	// TCP wins (two ready declarations against one): c, which declares 9000 as HTTP, is out.
	res := clBuild(t, clOneService(t, a, b, c))
	if got := clAddresses(clHosts(clLoadAssignment(t, res, LoadAssignment(pay, 9000)))); !slices.Equal(got, []string{"10.244.1.11:18008", "10.244.1.12:18008"}) {
		t.Errorf("9000 while TCP wins: hosts %v, want payments-a and payments-b", got)
	}
	clCluster(t, res, SourceCluster(TCPCluster(pay, 9000), web))
	if slices.Contains(clClusterNames(res), SourceCluster(HTTPCluster(pay, 9000), web)) {
		t.Errorf("an HTTP cluster for 9000 exists while TCP wins")
	}
	// Every port's membership, not just the conflicted one's: 8080 has all three.
	if got := clHosts(clLoadAssignment(t, res, LoadAssignment(pay, 8080))); len(got) != 3 {
		t.Errorf("8080: hosts %v, want all three endpoints", got)
	}

	// HTTP wins once a and b are unhealthy (one ready declaration against none): only c is in.
	a.Status.Health, b.Status.Health = meshv1alpha1.HealthUnhealthy, meshv1alpha1.HealthUnhealthy
	res = clBuild(t, clOneService(t, a, b, c))
	if got := clAddresses(clHosts(clLoadAssignment(t, res, LoadAssignment(pay, 9000)))); !slices.Equal(got, []string{"10.244.1.13:18008"}) {
		t.Errorf("9000 while HTTP wins: hosts %v, want payments-c", got)
	}
	clCluster(t, res, SourceCluster(HTTPCluster(pay, 9000), web))
	for _, gone := range []string{SourceCluster(TCPCluster(pay, 9000), web), SourceCluster(TCPDefaultCluster(pay), web)} {
		if slices.Contains(clClusterNames(res), gone) {
			t.Errorf("%s exists while HTTP wins 9000 (the service has no TCP port)", gone)
		}
	}
}

// TestHealthAndWeights: Healthy is HEALTHY, Draining DRAINING, and Unhealthy, Pending and an
// unset health are UNHEALTHY (never UNKNOWN, which Envoy treats as healthy); every host is the
// peer's inbound, weighted by its endpoint (a zero weight counts as 1).
func TestHealthAndWeights(t *testing.T) {
	cases := []struct {
		health meshv1alpha1.Health
		weight int32
		want   corev3.HealthStatus
	}{
		{meshv1alpha1.HealthHealthy, 1024, corev3.HealthStatus_HEALTHY},
		{meshv1alpha1.HealthDraining, 7, corev3.HealthStatus_DRAINING},
		{meshv1alpha1.HealthUnhealthy, 65535, corev3.HealthStatus_UNHEALTHY},
		{meshv1alpha1.HealthPending, 1, corev3.HealthStatus_UNHEALTHY},
		{"", 0, corev3.HealthStatus_UNHEALTHY},
	}
	var endpoints []meshv1alpha1.MeshEndpoint
	var want []clHost
	for i, tc := range cases {
		ip := "10.244.1." + strconv.Itoa(11+i)
		ep := clEndpoint(t, "payments", "payments-"+strconv.Itoa(i), ip, 8080, "8080/HTTP")
		ep.Status.Health, ep.Spec.Weight = tc.health, tc.weight
		endpoints = append(endpoints, ep)
		want = append(want, clHost{address: ip + ":18008", health: tc.want, weight: max(uint32(tc.weight), 1)})
	}
	res := clBuild(t, clOneService(t, endpoints...))
	cla := clLoadAssignment(t, res, LoadAssignment(FQDN("payments", "shop", clDomain), 8080))
	if got := clHosts(cla); !slices.Equal(got, want) {
		t.Errorf("hosts\n got %+v\nwant %+v", got, want)
	}
	if w := cla.GetEndpoints()[0].GetLoadBalancingWeight().GetValue(); w != 1024+7+65535+1+1 {
		t.Errorf("locality weight %d, want the sum of its hosts' weights %d", w, 1024+7+65535+1+1)
	}
}

// clLocality is one locality group as the tests read it.
type clLocality struct {
	region, zone string
	priority     uint32
	weight       uint32
	hosts        int
}

func clLocalities(cla *endpointv3.ClusterLoadAssignment) []clLocality {
	var out []clLocality
	for _, l := range cla.GetEndpoints() {
		out = append(out, clLocality{region: l.GetLocality().GetRegion(), zone: l.GetLocality().GetZone(),
			priority: l.GetPriority(), weight: l.GetLoadBalancingWeight().GetValue(), hosts: len(l.GetLbEndpoints())})
	}
	return out
}

// TestLocalityPriorities: endpoints group by (region, zone); the node's zone is priority 0, its
// region's other zones 1, other regions 2, ranked densely when a tier is empty; each locality
// weighs the sum of its hosts' weights (> 0), and the order is fixed.
func TestLocalityPriorities(t *testing.T) {
	at := func(name, ip, region, zone string, weight int32) meshv1alpha1.MeshEndpoint {
		ep := clEndpoint(t, "payments", name, ip, 8080, "8080/HTTP")
		ep.Spec.Locality, ep.Spec.Weight = meshv1alpha1.Locality{Region: region, Zone: zone}, weight
		return ep
	}
	near := []meshv1alpha1.MeshEndpoint{at("p1", "10.244.1.1", "r1", "r1a", 1024), at("p6", "10.244.1.6", "r1", "r1a", 10)}
	far := []meshv1alpha1.MeshEndpoint{
		at("p2", "10.244.1.2", "r1", "r1b", 5), at("p3", "10.244.1.3", "r1", "r1c", 3),
		at("p4", "10.244.1.4", "r2", "r2a", 2), at("p5", "10.244.1.5", "r0", "r0a", 1),
	}
	name := LoadAssignment(FQDN("payments", "shop", clDomain), 8080)

	res := clBuild(t, clOneService(t, slices.Concat(far, near)...))
	want := []clLocality{
		{"r1", "r1a", 0, 1034, 2},
		{"r1", "r1b", 1, 5, 1}, {"r1", "r1c", 1, 3, 1},
		{"r0", "r0a", 2, 1, 1}, {"r2", "r2a", 2, 2, 1},
	}
	if got := clLocalities(clLoadAssignment(t, res, name)); !slices.Equal(got, want) {
		t.Errorf("node in r1/r1a: localities\n got %+v\nwant %+v", got, want)
	}

	// Nothing in the node's zone: the same region is the first priority, and none is skipped.
	res = clBuild(t, clOneService(t, far...))
	want = []clLocality{{"r1", "r1b", 0, 5, 1}, {"r1", "r1c", 0, 3, 1}, {"r0", "r0a", 1, 1, 1}, {"r2", "r2a", 1, 2, 1}}
	if got := clLocalities(clLoadAssignment(t, res, name)); !slices.Equal(got, want) {
		t.Errorf("nothing in r1a: localities\n got %+v\nwant %+v", got, want)
	}

	// No topology anywhere: one locality, present though empty, priority 0.
	m := clOneService(t, clEndpoint(t, "payments", "p1", "10.244.1.1", 8080, "8080/HTTP"))
	m.Node.Locality = meshv1alpha1.Locality{}
	cla := clLoadAssignment(t, clBuild(t, m), name)
	if got := clLocalities(cla); !slices.Equal(got, []clLocality{{"", "", 0, 1024, 1}}) || cla.GetEndpoints()[0].GetLocality() == nil {
		t.Errorf("no topology: localities %+v (locality message %v), want one empty locality at priority 0", got, cla.GetEndpoints()[0].GetLocality())
	}
}

// TestSharedAddressIsOneHost: a deleted pod's Draining endpoint and the new pod given its IP are
// one host; the Healthy one is kept, whatever their order, and Skipped names the other.
func TestSharedAddressIsOneHost(t *testing.T) {
	old := clEndpoint(t, "payments", "payments-a", "10.244.1.11", 8080, "8080/HTTP")
	old.Status.Health = meshv1alpha1.HealthDraining
	fresh := clEndpoint(t, "payments", "payments-b", "10.244.1.11", 8080, "8080/HTTP")
	other := clEndpoint(t, "payments", "payments-c", "10.244.1.12", 8080, "8080/HTTP")
	res := clBuild(t, clOneService(t, old, fresh, other))

	name := LoadAssignment(FQDN("payments", "shop", clDomain), 8080)
	want := []clHost{{"10.244.1.11:18008", corev3.HealthStatus_HEALTHY, 1024}, {"10.244.1.12:18008", corev3.HealthStatus_HEALTHY, 1024}}
	if got := clHosts(clLoadAssignment(t, res, name)); !slices.Equal(got, want) {
		t.Errorf("hosts\n got %+v\nwant %+v", got, want)
	}
	if len(res.Skipped) != 1 || !strings.Contains(res.Skipped[0], "endpoint shop/payments-a (Draining) is left out") ||
		!strings.Contains(res.Skipped[0], "shop/payments-b (Healthy), which is kept") {
		t.Errorf("skipped %q, want payments-a named as left out", res.Skipped)
	}
}

// TestLoadAssignmentsAreWhatClustersRead: the EDS set is exactly the names the clusters read,
// so go-control-plane's Consistent() accepts the snapshot, with pods and without. The control:
// a snapshot missing one load assignment is refused.
func TestLoadAssignmentsAreWhatClustersRead(t *testing.T) {
	snapshot := func(res Resources) *cachev3.Snapshot {
		t.Helper()
		s, err := cachev3.NewSnapshot("1", map[resourcev3.Type][]types.Resource{
			resourcev3.ClusterType:  clResources(res.Clusters),
			resourcev3.EndpointType: clResources(res.Endpoints),
		})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	m := clMixedMesh(t)
	res := clBuild(t, m)
	if err := snapshot(res).Consistent(); err != nil {
		t.Errorf("mixed mesh: %v", err)
	}
	noPod := m
	noPod.Pods = nil
	if err := snapshot(clBuild(t, noPod)).Consistent(); err != nil {
		t.Errorf("mixed mesh without a local pod: %v", err)
	}

	res.Endpoints = res.Endpoints[1:]
	err := snapshot(res).Consistent()
	if err == nil {
		t.Fatal("a snapshot missing a load assignment passed Consistent()")
	}
	t.Logf("negative control: %v", err)
}

func clResources[T types.Resource](in []T) []types.Resource {
	out := make([]types.Resource, len(in))
	for i, r := range in {
		out[i] = r
	}
	return out
}

// TestDeterministic: the same mesh gives equal resources, and the same endpoints in any order
// give the same bytes.
func TestDeterministic(t *testing.T) {
	at := func(name, ip, zone string, health meshv1alpha1.Health, ports ...string) meshv1alpha1.MeshEndpoint {
		ep := clEndpoint(t, "payments", name, ip, 8080, ports...)
		ep.Spec.Locality, ep.Status.Health = meshv1alpha1.Locality{Region: "r1", Zone: zone}, health
		return ep
	}
	endpoints := []meshv1alpha1.MeshEndpoint{
		at("p1", "10.244.1.1", "r1a", meshv1alpha1.HealthHealthy, "8080/HTTP", "9000/TCP", "9090/HTTP2"),
		at("p2", "10.244.1.2", "r1b", meshv1alpha1.HealthDraining, "8080/HTTP", "9000/HTTP"),
		at("p3", "10.244.1.3", "r1c", meshv1alpha1.HealthPending, "8080/HTTP", "9000/TCP"),
		at("p4", "10.244.1.4", "r1a", meshv1alpha1.HealthHealthy, "8080/HTTP", "9090/HTTP2"),
		at("p5", "10.244.1.4", "r1b", meshv1alpha1.HealthUnhealthy, "8080/HTTP"),
	}
	mesh := func(order []meshv1alpha1.MeshEndpoint) model.Mesh {
		m := clMixedMesh(t)
		m.Services[1] = clService(t, "payments", order...)
		m.Pods = append(m.Pods, clPod(t, "batch-1", "batch", "10.244.1.8", "7000/TCP"))
		return m
	}
	first := clBuild(t, mesh(endpoints))
	if again := clBuild(t, mesh(endpoints)); !clEqual(first, again) {
		t.Error("the same mesh built twice gave different resources")
	}
	want := clBytes(t, first)
	for _, order := range [][]meshv1alpha1.MeshEndpoint{
		slices.Concat(endpoints[3:], endpoints[:3]),
		{endpoints[4], endpoints[1], endpoints[3], endpoints[0], endpoints[2]},
	} {
		slices.Reverse(order)
		if got := clBytes(t, clBuild(t, mesh(order))); !bytes.Equal(got, want) {
			t.Errorf("endpoints in another order gave other bytes (%d vs %d)", len(got), len(want))
		}
	}
}

func clEqual(a, b Resources) bool {
	return slices.EqualFunc(a.Clusters, b.Clusters, func(x, y *clusterv3.Cluster) bool { return proto.Equal(x, y) }) &&
		slices.EqualFunc(a.Endpoints, b.Endpoints, func(x, y *endpointv3.ClusterLoadAssignment) bool { return proto.Equal(x, y) }) &&
		slices.Equal(a.Skipped, b.Skipped)
}

// clBytes is every cluster and load assignment, deterministically marshalled, in order, and the
// skip notes.
func clBytes(t testing.TB, res Resources) []byte {
	t.Helper()
	var out []byte
	opts := proto.MarshalOptions{Deterministic: true}
	for _, m := range slices.Concat(clMessages(res.Clusters), clMessages(res.Endpoints)) {
		b, err := opts.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b...)
	}
	return append(out, strings.Join(res.Skipped, "\n")...)
}

func clMessages[T proto.Message](in []T) []proto.Message {
	out := make([]proto.Message, len(in))
	for i, m := range in {
		out[i] = m
	}
	return out
}
