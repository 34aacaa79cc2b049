// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xds_test

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/xds"
	"github.com/aether-mesh/aether-operator/internal/xds/xdscheck"
	"github.com/aether-mesh/aether-operator/internal/xds/xdstest"
)

// differences says how a Builder's build of a mesh differs from Build's (nil when it does not):
// every resource byte for byte, the notes, the error.
func differences(got xds.Resources, gotErr error, want xds.Resources, wantErr error) []string {
	var out []string
	if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
		out = append(out, fmt.Sprintf("error %v, Build's %v", gotErr, wantErr))
	}
	if !slices.Equal(got.Skipped, want.Skipped) {
		out = append(out, fmt.Sprintf("skipped %q, Build's %q", got.Skipped, want.Skipped))
	}
	return append(out, xdscheck.Identical(want, got)...)
}

// builtAsBuild builds m with bl and with Build, and reports any difference.
func builtAsBuild(t *testing.T, bl *xds.Builder, m model.Mesh, what string) xds.Resources {
	t.Helper()
	got, gotErr := bl.Build(m)
	want, wantErr := xds.Build(m)
	if d := differences(got, gotErr, want, wantErr); d != nil {
		t.Errorf("%s: the Builder's build differs from Build's:\n%s", what, strings.Join(d, "\n"))
	}
	return got
}

// readFrom are the fields of the mesh the Builder's kept parts derive from (its keys): a change
// of any of them must change the build in some scenario, so TestBuilderFollowsEveryChange
// proves that the Builder saw it, not merely that the change did not matter.
var readFrom = []string{
	"Domain", "Issuer", "Node.Locality.Region", "Node.Locality.Zone",
	"Services[].Namespace", "Services[].Name", "Services[].Identity", "Services[].VIP", "Services[].Primary",
	"Services[].Ports[].Number", "Services[].Ports[].Protocol", "Services[].Ports[].Pairs[].Protocol",
	"Services[].Ports[].Pairs[].Members[].Namespace", "Services[].Ports[].Pairs[].Members[].Name",
	"Services[].Ports[].Pairs[].Members[].Address", "Services[].Ports[].Pairs[].Members[].Health",
	"Services[].Ports[].Pairs[].Members[].Weight", "Services[].Ports[].Pairs[].Members[].Locality.Region",
	"Services[].Ports[].Pairs[].Members[].Locality.Zone",
	"Pods[].Namespace", "Pods[].Name", "Pods[].Address", "Pods[].Primary", "Pods[].Ports[].Port", "Pods[].Ports[].Protocol",
	"Pods[].NetNS", "Pods[].Identity", "Pods[].Capture", "Pods[].UDSPath",
}

// TestBuilderFollowsEveryChange is the table of inputs a kept part derives from, flipped one at a
// time: for every scenario and every change of one field of its mesh (each value set to another,
// each list shortened and lengthened: xds.Changes, by reflection, so a field added to the model
// later is changed too), a Builder that built the scenario builds the changed mesh exactly as
// Build does, byte for byte, and then the scenario again. A part reused from a stale key would
// differ. Every field the Builder's keys read (readFrom) must have changed some build.
func TestBuilderFollowsEveryChange(t *testing.T) {
	changedBuild := map[string]bool{}
	all := xdstest.All()
	scenarios := map[string]model.Mesh{}
	for _, name := range []string{"mixed-http-primary", "tcp-primary-http-secondary", "http-80", "scoped", "rollout-conflict", "routes", "uds"} {
		scenarios[name] = all[name]
	}
	scenarios["shared-address"] = sharedAddress(t, all["mixed-http-primary"])
	for _, name := range slices.Sorted(maps.Keys(scenarios)) {
		base := scenarios[name]
		baseRes, err := xds.Build(base)
		if err != nil {
			t.Fatal(err)
		}
		bl := new(xds.Builder)
		builtAsBuild(t, bl, base, name)
		for _, c := range xds.Changes(&base) {
			m := xds.DeepCopy(base)
			c.Apply(&m)
			// A change of a member usually breaks its service's counts (Validate refuses it, and
			// the service is left out); the same change with the counts made right again is the
			// endpoint change the agent sees.
			variants := []model.Mesh{m}
			if recounted := recount(m); !reflect.DeepEqual(recounted, m) {
				variants = append(variants, recounted)
			}
			for _, v := range variants {
				res := builtAsBuild(t, bl, v, name+": "+c.String())
				if xdscheck.Identical(baseRes, res) != nil || !slices.Equal(baseRes.Skipped, res.Skipped) {
					changedBuild[c.Field] = true
				}
				again, err := bl.Build(base)
				if d := differences(again, err, baseRes, nil); d != nil {
					t.Errorf("%s: back from %s: the Builder's build differs from Build's:\n%s", name, c, strings.Join(d, "\n"))
				}
			}
		}
	}
	for _, field := range readFrom {
		if !changedBuild[field] {
			t.Errorf("no change of %s changed a build: the table does not show that the Builder follows it", field)
		}
	}
	t.Logf("%d fields changed some build: %q", len(changedBuild), slices.Sorted(maps.Keys(changedBuild)))

	// The negative control: a Builder whose load assignments' key forgets health reuses a stale
	// load assignment after a health change, and the comparison catches it.
	base := all["mixed-http-primary"]
	changed := drain(t, base, "payments-1")
	bl := new(xds.Builder)
	builtAsBuild(t, bl, base, "the negative control's base")
	bl.ForgetHealth(changed)
	got, gotErr := bl.Build(changed)
	want, wantErr := xds.Build(changed)
	d := differences(got, gotErr, want, wantErr)
	if d == nil {
		t.Fatal("negative control: a load assignment reused across a health change was not caught")
	}
	t.Logf("negative control (health left out of the key): %s", d[0])
}

// recount is m with every service's counts made right for its members: each pair's ready
// members and newest creation, each service's endpoints and ready endpoints (model.BuildService's
// rules).
func recount(m model.Mesh) model.Mesh {
	m = xds.DeepCopy(m)
	for i := range m.Services {
		s := &m.Services[i]
		endpoints, ready := map[string]bool{}, map[string]bool{}
		for _, p := range s.Ports {
			for j := range p.Pairs {
				pr := &p.Pairs[j]
				pr.Ready, pr.Newest = 0, time.Time{}
				for _, mb := range pr.Members {
					key := mb.Namespace + "/" + mb.Name
					endpoints[key] = true
					if mb.Health == meshv1alpha1.HealthHealthy {
						pr.Ready++
						ready[key] = true
					}
					if pr.Newest.Before(mb.Created) {
						pr.Newest = mb.Created
					}
				}
			}
		}
		if len(s.Ports) > 0 {
			s.Endpoints, s.Ready = int32(len(endpoints)), int32(len(ready))
		}
	}
	return m
}

// drain is m with member name Draining (and the ready counts that follow), a valid mesh.
func drain(t *testing.T, m model.Mesh, name string) model.Mesh {
	t.Helper()
	m = xds.DeepCopy(m)
	for i := range m.Services {
		s := &m.Services[i]
		drained := false
		for _, p := range s.Ports {
			for j := range p.Pairs {
				for k := range p.Pairs[j].Members {
					if mb := &p.Pairs[j].Members[k]; mb.Name == name && mb.Health == meshv1alpha1.HealthHealthy {
						mb.Health = meshv1alpha1.HealthDraining
						p.Pairs[j].Ready--
						drained = true
					}
				}
			}
		}
		if drained {
			s.Ready--
			if err := s.Validate(); err != nil {
				t.Fatalf("draining %s: %v", name, err)
			}
			return m
		}
	}
	t.Fatalf("no healthy member %s", name)
	return m
}

// sharedAddress is m with payments' second member at its first member's address, in every pair:
// one host, and a note naming both members (the only output a member's name reaches).
func sharedAddress(t *testing.T, m model.Mesh) model.Mesh {
	t.Helper()
	m = xds.DeepCopy(m)
	shared := 0
	for _, s := range m.Services {
		for _, p := range s.Ports {
			for _, pr := range p.Pairs {
				if len(pr.Members) > 1 {
					pr.Members[1].Address = pr.Members[0].Address
					shared++
				}
			}
		}
	}
	res, err := xds.Build(m)
	if err != nil || shared == 0 || len(res.Skipped) == 0 {
		t.Fatalf("the shared-address mesh: %d pairs share, %d notes, %v", shared, len(res.Skipped), err)
	}
	return m
}

// TestBuilderEqualsBuild is the Builder's property test: for random meshes (xdstest.Decode of
// random bytes) and random sequences of changes (an endpoint change, xdstest.EndpointChange; a
// change of one field, xds.Changes; a mesh decoded from the bytes with one byte changed; the
// same mesh again), one Builder's builds equal a fresh Build's byte for byte at every step, and
// no build modifies what an earlier one returned (the Builder hands out the same messages again).
func TestBuilderEqualsBuild(t *testing.T) {
	rng := rand.New(rand.NewPCG(12, 2026))
	steps := 0
	for run := range 100 {
		data := make([]byte, 8+rng.IntN(56))
		for i := range data {
			data[i] = byte(rng.UintN(256))
		}
		m := xdstest.Decode(data).Mesh()
		bl := new(xds.Builder)
		var earlier []digested
		for step := range 8 {
			what := fmt.Sprintf("run %d (data %x) step %d", run, data, step)
			res := builtAsBuild(t, bl, m, what)
			for _, e := range earlier {
				if !bytes.Equal(e.sum, digest(e.res)) {
					t.Fatalf("%s: a later build modified what %s returned", what, e.what)
				}
			}
			earlier = append(earlier, digested{what, res, digest(res)})
			m, data = change(rng, m, data)
			steps++
		}
	}
	t.Logf("%d builds compared", steps)
}

// change is a random change of m (decoded from data): see TestBuilderEqualsBuild.
func change(rng *rand.Rand, m model.Mesh, data []byte) (model.Mesh, []byte) {
	switch rng.IntN(4) {
	case 0:
		if changed, err := xdstest.EndpointChange(m); err == nil {
			return changed, data
		}
	case 1:
		if changes := xds.Changes(&m); len(changes) > 0 {
			changed := xds.DeepCopy(m)
			changes[rng.IntN(len(changes))].Apply(&changed)
			if rng.IntN(2) == 0 {
				changed = recount(changed)
			}
			return changed, data
		}
	case 2:
		data = slices.Clone(data)
		data[rng.IntN(len(data))] ^= byte(1 + rng.UintN(255))
		return xdstest.Decode(data).Mesh(), data
	}
	return m, data
}

type digested struct {
	what string
	res  xds.Resources
	sum  []byte
}

// digest is a hash of every resource of res, in order, deterministically marshaled.
func digest(res xds.Resources) []byte {
	h := sha256.New()
	var all []proto.Message
	for _, c := range res.Clusters {
		all = append(all, c)
	}
	for _, e := range res.Endpoints {
		all = append(all, e)
	}
	for _, l := range res.Listeners {
		all = append(all, l)
	}
	for _, r := range res.Routes {
		all = append(all, r)
	}
	for _, m := range all {
		b, err := xdscheck.Bytes(m)
		if err != nil {
			panic(err)
		}
		h.Write(b)
	}
	return h.Sum(nil)
}

// TestBuilderOverAFleet: a Builder over a fleet of 30 services through a run of endpoint
// changes (members drained, with the counts that follow, and once xdstest.EndpointChange: a
// health flipped and a replica added), each on the mesh the last one made, builds what Build
// does, changes a load assignment each time, and keeps every listener and route of the first
// build (the same messages: reused, not built again).
func TestBuilderOverAFleet(t *testing.T) {
	m := xdstest.Fleet(30, 4).Mesh()
	bl := new(xds.Builder)
	first := builtAsBuild(t, bl, m, "the fleet")
	last := first
	for step := range 6 {
		if step != 1 {
			m = drain(t, m, fmt.Sprintf("svc-%04d-%02d", 5*step, 1))
		} else {
			changed, err := xdstest.EndpointChange(m)
			if err != nil {
				t.Fatal(err)
			}
			m = changed
		}
		res := builtAsBuild(t, bl, m, fmt.Sprintf("endpoint change %d", step))
		if !slices.Equal(res.Listeners, first.Listeners) || !slices.Equal(res.Routes, first.Routes) {
			t.Errorf("endpoint change %d: the listeners or routes were built again", step)
		}
		if xdscheck.Identical(last, res) == nil {
			t.Errorf("endpoint change %d changed no load assignment: the comparison proves nothing", step)
		}
		last = res
	}
}

// TestBuilderFailsAsBuild: a mesh Build refuses (an empty domain, then a pod without an address,
// which gives an app cluster the validator refuses) is refused by a Builder with the same error,
// and the Builder builds the next good mesh as Build does.
func TestBuilderFailsAsBuild(t *testing.T) {
	good := xdstest.MixedHTTPPrimary()
	noDomain := xds.DeepCopy(good)
	noDomain.Domain = ""
	noAddress := xds.DeepCopy(good)
	noAddress.Pods[0].Address = ""
	bl := new(xds.Builder)
	builtAsBuild(t, bl, good, "the good mesh")
	for _, bad := range []model.Mesh{noDomain, noAddress} {
		if _, err := bl.Build(bad); err == nil {
			t.Fatalf("a bad mesh built")
		}
		builtAsBuild(t, bl, bad, "a bad mesh")
		builtAsBuild(t, bl, good, "the good mesh again")
	}
}

// TestPackedBytesAreProtoMarshals: every Any in a build holds exactly what proto.Marshal
// (deterministic) writes for the message it holds: the upstream TLS contexts are put together
// from their parts' bytes (xds's upstreamTLSBytes), and must not differ by a byte from a
// marshal. The negative control is a context whose fields are written in the wrong order.
func TestPackedBytesAreProtoMarshals(t *testing.T) {
	scenarios := xdstest.All()
	scenarios["fleet"] = xdstest.Fleet(20, 3).Mesh()
	checked := 0
	for _, name := range slices.Sorted(maps.Keys(scenarios)) {
		res, err := xds.Build(scenarios[name])
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range res.Clusters {
			if ts := c.GetTransportSocket(); ts != nil {
				checked++
				if err := remarshals(ts.GetTypedConfig()); err != nil {
					t.Errorf("%s: cluster %s: %v", name, c.GetName(), err)
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no cluster has a transport socket: nothing was checked")
	}

	// The negative control: a valid context whose sni (field 2) is written before its common
	// context (field 1). Both parse the same; proto.Marshal writes field 1 first.
	good, err := anypb.New(&tlsv3.UpstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{}, Sni: "p"})
	if err != nil {
		t.Fatal(err)
	}
	if err := remarshals(good); err != nil {
		t.Fatalf("a context packed by anypb.New: %v", err)
	}
	swapped := &anypb.Any{TypeUrl: good.TypeUrl, Value: []byte{0x12, 0x01, 'p', 0x0a, 0x00}}
	err = remarshals(swapped)
	if err == nil {
		t.Fatal("negative control: bytes in the wrong field order were not caught")
	}
	t.Logf("negative control: %v", err)
}

// remarshals reports an error unless a's value is what proto.Marshal writes for its message.
func remarshals(a *anypb.Any) error {
	m, err := a.UnmarshalNew()
	if err != nil {
		return err
	}
	again, err := xdscheck.Bytes(m)
	if err != nil {
		return err
	}
	if !bytes.Equal(again, a.GetValue()) {
		return fmt.Errorf("the packed bytes %x are not proto.Marshal's %x", a.GetValue(), again)
	}
	return nil
}
