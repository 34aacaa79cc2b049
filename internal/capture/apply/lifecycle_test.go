// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package apply_test

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/capture"
	"github.com/aether-mesh/aether-operator/internal/capture/apply"
	"github.com/aether-mesh/aether-operator/internal/capture/apply/nstest"
	"github.com/aether-mesh/aether-operator/internal/golden"
	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/xds/xdstest"
)

// The service the incremental tests add: ledger, VIP 10.97.0.30 (no fleet service has it), TCP 7000 (its primary): its
// dial ports are 80, 7000, 18081 and 18082.
const ledgerVIP = "10.97.0.30"

// withLedger is m with ledger added.
func withLedger(m model.Mesh) model.Mesh {
	m.Services = append(slices.Clone(m.Services), model.BuildService(model.Input{Namespace: "shop", Name: "ledger",
		Identity: xdstest.Identity("shop", "ledger"), VIP: ledgerVIP, Endpoints: []meshv1alpha1.MeshEndpoint{ledgerEndpoint()}}))
	return m
}

func ledgerEndpoint() meshv1alpha1.MeshEndpoint {
	ep := meshv1alpha1.MeshEndpoint{}
	ep.Namespace, ep.Name = "shop", "ledger-0"
	ep.Spec = meshv1alpha1.MeshEndpointSpec{ServiceName: "ledger", NodeName: "node-b", Address: "10.244.2.30", PrimaryPort: 7000,
		Weight: 1, Ports: []meshv1alpha1.PortProtocol{{Port: 7000, Protocol: meshv1alpha1.ProtocolTCP}}}
	ep.Status.Health = meshv1alpha1.HealthHealthy
	return ep
}

// TestServiceChangesElementsOnly: a new service is one batch of its four set elements and no
// rule change (nft lists the same rule handles before and after), and is captured; removed, it is
// one batch deleting the four, and is no longer captured. The same ruleset again sends nothing.
func TestServiceChangesElementsOnly(t *testing.T) {
	ns := nstest.New(t, paymentsVIP, ledgerVIP)
	ns.Serve(t, 7000)
	m := xdstest.MixedHTTPPrimary()
	pod := clientPod(t, m, model.CaptureSurface, ns)
	a := apply.New()
	built := capture.Build(m, pod, capture.Options{})
	sync(t, a, ns, built)
	handles := ns.RuleHandles(t)
	if len(handles) != len(built.Chains[0].Rules) {
		t.Fatalf("rule handles %v, want the %d rules of surface mode", handles, len(built.Chains[0].Rules))
	}
	if got := ns.Dial(ledgerVIP + ":7000"); got != nstest.Direct+" "+ledgerVIP+":7000" {
		t.Fatalf("before ledger exists: %q", got)
	}

	rep := sync(t, a, ns, capture.Build(withLedger(m), pod, capture.Options{}))
	if want := (apply.Stats{ElementsAdded: 4}); rep.Batches != 1 || rep.Stats != want || rep.Read || rep.Result != apply.Applied {
		t.Errorf("adding ledger: %+v, want one batch of %+v, no read", rep, want)
	}
	if got := ns.RuleHandles(t); !slices.Equal(got, handles) {
		t.Errorf("rule handles %v after adding a service, want %v unchanged", got, handles)
	}
	if got, want := ns.Dial(ledgerVIP+":7000"), nstest.Captured+" "+ledgerVIP+":7000"; got != want {
		t.Errorf("dial ledger:7000: %q, want %q", got, want)
	}

	rep = sync(t, a, ns, capture.Build(withLedger(m), pod, capture.Options{}))
	if rep.Batches != 0 || rep.Result != apply.Unchanged || rep.Read {
		t.Errorf("the same ruleset again: %+v, want nothing sent and nothing read", rep)
	}

	rep = sync(t, a, ns, capture.Build(m, pod, capture.Options{}))
	if want := (apply.Stats{ElementsDeleted: 4}); rep.Batches != 1 || rep.Stats != want {
		t.Errorf("removing ledger: %+v, want one batch of %+v", rep, want)
	}
	if got := ns.RuleHandles(t); !slices.Equal(got, handles) {
		t.Errorf("rule handles %v after removing a service, want %v unchanged", got, handles)
	}
	if got, want := ns.Dial(ledgerVIP+":7000"), nstest.Direct+" "+ledgerVIP+":7000"; got != want {
		t.Errorf("dial ledger:7000 after it is gone: %q, want %q", got, want)
	}
}

// TestNodeAddressChangesElementsOnly: the node's addresses changing is one batch of node_addrs4
// elements and no rule change (nft lists the same rule handles before and after: the table is
// never without its rules). In mode all, ledger's pod address 10.244.2.30 is captured; once the
// node has it too (a meshed pod on the host network of its own node), it is returned, and
// captured again once the node no longer has it.
func TestNodeAddressChangesElementsOnly(t *testing.T) {
	const podAddr = "10.244.2.30" // ledgerEndpoint's
	ns := nstest.New(t, podAddr)
	ns.Serve(t, 7000)
	m := withLedger(xdstest.MixedHTTPPrimary())
	pod := clientPod(t, m, model.CaptureAll, ns)
	a := apply.New()
	nodeAddr := netip.MustParseAddr("10.244.1.1")
	sync(t, a, ns, capture.Build(m, pod, capture.Options{Node: []netip.Addr{nodeAddr}}))
	handles := ns.RuleHandles(t)
	address := podAddr + ":7000"
	if got, want := ns.Dial(address), nstest.Captured+" "+address; got != want {
		t.Fatalf("dial %s, a mesh address: %q, want %q", address, got, want)
	}
	for _, step := range []struct {
		name  string
		node  []netip.Addr
		stats apply.Stats
		dial  string
	}{
		{"the node has the address too", []netip.Addr{nodeAddr, netip.MustParseAddr(podAddr)}, apply.Stats{ElementsAdded: 1}, nstest.Direct + " " + address},
		{"the node no longer has it", []netip.Addr{nodeAddr}, apply.Stats{ElementsDeleted: 1}, nstest.Captured + " " + address},
	} {
		rep := sync(t, a, ns, capture.Build(m, pod, capture.Options{Node: step.node}))
		if rep.Batches != 1 || rep.Stats != step.stats || rep.Read {
			t.Errorf("%s: %+v, want one batch of %+v, no read", step.name, rep, step.stats)
		}
		if got := ns.RuleHandles(t); !slices.Equal(got, handles) {
			t.Errorf("%s: rule handles %v, want %v unchanged", step.name, got, handles)
		}
		if got := ns.Dial(address); got != step.dial {
			t.Errorf("%s: dial %s: %q, want %q", step.name, address, got, step.dial)
		}
	}
}

// TestModeChangeRulesOnly: a pod moving from surface to scoped mode changes the rules its modes
// do not share and keeps the others (their handles), in one batch.
func TestModeChangeRulesOnly(t *testing.T) {
	ns := nstest.New(t)
	m := xdstest.MixedHTTPPrimary()
	a := apply.New()
	sync(t, a, ns, capture.Build(m, clientPod(t, m, model.CaptureSurface, ns), capture.Options{}))
	before := ns.RuleHandles(t)
	rep := sync(t, a, ns, capture.Build(m, clientPod(t, m, model.CaptureScoped, ns), capture.Options{}))
	// Sets mesh_ports (2 ports) and mesh_addrs4 (2 VIPs, 4 pod addresses) and mesh_addrs6 in,
	// surface4/6 out; the two redirects replaced.
	want := apply.Stats{ElementsAdded: 8, RulesAdded: 2, RulesDeleted: 2, Structure: 5}
	if rep.Batches != 1 || rep.Stats != want {
		t.Errorf("surface to scoped: %+v, want one batch of %+v", rep, want)
	}
	after := ns.RuleHandles(t)
	kept := len(before) - 2 // every rule but the two redirects
	if len(after) != len(before) || !slices.Equal(after[:kept], before[:kept]) {
		t.Errorf("rule handles %v, want the exclusions' %v kept and two new rules", after, before[:kept])
	}
	if got := listing(t, ns); got != nftListing(t, capture.Build(m, clientPod(t, m, model.CaptureScoped, ns), capture.Options{})) {
		t.Errorf("after the mode change nft lists\n%s", got)
	}
}

// nftListing is what nft lists for ruleset r loaded from its text in a namespace of its own.
func nftListing(t testing.TB, r capture.Ruleset) string {
	t.Helper()
	ns := nstest.New(t)
	loadText(t, ns, r.String())
	return listing(t, ns)
}

// TestRepair: a table flushed or deleted by hand, or given a rule by hand, is found by the next
// Check (its generation moved) and brought back in one batch; a Check with nothing touched reads
// nothing and sends nothing.
func TestRepair(t *testing.T) {
	m := xdstest.MixedHTTPPrimary()
	tamper := map[string][]string{
		"flush table":   {"flush", "table", "inet", "aether"},
		"delete table":  {"delete", "table", "inet", "aether"},
		"flush set":     {"flush", "set", "inet", "aether", "surface4"},
		"add a rule":    {"insert", "rule", "inet", "aether", "output", "tcp", "dport", "18082", "return"},
		"delete a rule": {"delete", "rule", "inet", "aether", "output", "handle", "0"}, // handle filled in below
	}
	for name, args := range tamper {
		t.Run(name, func(t *testing.T) {
			ns := nstest.New(t, paymentsVIP)
			ns.Serve(t, 18082)
			want := capture.Build(m, clientPod(t, m, model.CaptureSurface, ns), capture.Options{})
			a := apply.New()
			sync(t, a, ns, want)
			listed := listing(t, ns)
			if rep, err := a.Check(ns.Path); err != nil || rep.Result != apply.Unchanged || rep.Read || rep.Batches != 0 {
				t.Fatalf("Check of an untouched table: %+v, %v; want unchanged, nothing read or sent", rep, err)
			}
			if name == "delete a rule" {
				surface4 := slices.IndexFunc(want.Chains[0].Rules, func(r capture.Rule) bool { return r.Match.Set == capture.SetSurface4 })
				args[len(args)-1] = fmt.Sprint(ns.RuleHandles(t)[surface4]) // the surface4 redirect
			}
			ns.Nft(t, args...)
			if got := ns.Dial(paymentsVIP + ":18082"); got == nstest.Captured+" "+paymentsVIP+":18082" {
				t.Fatalf("the tampering did not stop capture: %q", got)
			}
			rep, err := a.Check(ns.Path)
			if err != nil || rep.Result != apply.Repaired || !rep.Read || rep.Batches != 1 {
				t.Fatalf("Check after %s: %+v, %v; want repaired, read, one batch", name, rep, err)
			}
			if got := listing(t, ns); got != listed {
				t.Errorf("after the repair nft lists (-before +after):\n%s", diff(listed, got))
			}
			if got, want := ns.Dial(paymentsVIP+":18082"), nstest.Captured+" "+paymentsVIP+":18082"; got != want {
				t.Errorf("dial after the repair: %q, want %q", got, want)
			}
		})
	}
}

// TestForeignTableReplaced: a table inet aether that holds what capture never makes (a set of
// the same name and another type, a chain on another hook) is replaced in one batch.
func TestForeignTableReplaced(t *testing.T) {
	ns := nstest.New(t)
	loadText(t, ns, `table inet aether {
	set surface4 { type ipv4_addr; elements = { 10.9.9.9 } }
	chain output {
		type filter hook input priority 0; policy accept;
		tcp dport 22 accept
	}
}
`)
	m := xdstest.MixedHTTPPrimary()
	want := capture.Build(m, clientPod(t, m, model.CaptureSurface, ns), capture.Options{})
	rep := sync(t, apply.New(), ns, want)
	if rep.Batches != 1 || rep.Result != apply.Applied {
		t.Errorf("Sync over a foreign table: %+v, want one batch", rep)
	}
	if got, want := listing(t, ns), nftListing(t, want); got != want {
		t.Errorf("nft lists (-want +got):\n%s", diff(want, got))
	}
}

// TestRestartAdopts: a second applier (an agent restarted) adopts the table the first one
// programmed: it reads it once, sends nothing, and the rule handles and the namespace's ruleset
// generation stay; a loop dialling :18082 across the hand-over is captured every time. Its
// negative control deletes the table under the running loop, which the loop must notice.
func TestRestartAdopts(t *testing.T) {
	m := xdstest.MixedHTTPPrimary()
	ns := nstest.New(t, paymentsVIP)
	ns.Serve(t, 18082)
	want := capture.Build(m, clientPod(t, m, model.CaptureSurface, ns), capture.Options{})
	sync(t, apply.New(), ns, want)
	handles, listed := ns.RuleHandles(t), listing(t, ns)

	loop := startDialLoop(t, ns, paymentsVIP+":18082")
	loop.waitDials(t, 20)
	second := apply.New()
	rep := sync(t, second, ns, want)
	if rep.Result != apply.Unchanged || !rep.Read || rep.Batches != 0 {
		t.Errorf("a new applier's first Sync of an up-to-date table: %+v, want it read and nothing sent", rep)
	}
	loop.waitDials(t, loop.dials()+20)
	// A third applier, handed a mesh that has changed meanwhile: it reads the table and sends
	// only the new service's elements.
	rep = sync(t, apply.New(), ns, capture.Build(withLedger(m), clientPod(t, m, model.CaptureSurface, ns), capture.Options{}))
	if want := (apply.Stats{ElementsAdded: 4}); !rep.Read || rep.Batches != 1 || rep.Stats != want {
		t.Errorf("a new applier's first Sync of a changed mesh: %+v, want it read and one batch of %+v", rep, want)
	}
	loop.waitDials(t, loop.dials()+20)
	if bad := loop.stop(); bad != "" {
		t.Errorf("a dial across the hand-over was not captured: %s", bad)
	}
	if got := ns.RuleHandles(t); !slices.Equal(got, handles) {
		t.Errorf("rule handles %v after adoption, want %v", got, handles)
	}
	if rep, err := second.Check(ns.Path); err != nil || !rep.Read || rep.Result != apply.Repaired {
		t.Errorf("the second applier's Check after the third's commit: %+v, %v; want it read and brought back to its own ruleset", rep, err)
	}
	if got := listing(t, ns); got != listed {
		t.Errorf("after the second applier's Check nft lists (-before +after):\n%s", diff(listed, got))
	}
	if rep, err := second.Check(ns.Path); err != nil || rep.Read || rep.Batches != 0 {
		t.Errorf("the new applier's Check: %+v, %v; want nothing read or sent (it knows the generation)", rep, err)
	}

	t.Run("negative control: the loop sees a table deleted under it", func(t *testing.T) {
		loop := startDialLoop(t, ns, paymentsVIP+":18082")
		loop.waitDials(t, 5)
		ns.Nft(t, "delete", "table", "inet", "aether")
		deadline := time.Now().Add(10 * time.Second)
		for loop.uncaptured.Load() == 0 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		bad := loop.stop()
		if bad == "" {
			t.Fatal("the dial loop saw no uncaptured dial with the table deleted")
		}
		t.Logf("the loop reports: %s", bad)
	})
}

func diff(want, got string) string { return golden.Diff(want, got) }

// dialLoop dials one address from a namespace over and over, counting the dials that were not
// captured to that address.
type dialLoop struct {
	n, uncaptured atomic.Int64
	first         atomic.Value // string: the first uncaptured answer
	cancel        context.CancelFunc
	done          chan struct{}
}

func startDialLoop(t testing.TB, ns *nstest.NS, address string) *dialLoop {
	ctx, cancel := context.WithCancel(context.Background())
	l := &dialLoop{cancel: cancel, done: make(chan struct{})}
	want := nstest.Captured + " " + address
	go func() {
		defer close(l.done)
		for ctx.Err() == nil {
			if got := ns.Dial(address); got != want {
				l.first.CompareAndSwap(nil, got)
				l.uncaptured.Add(1)
			}
			l.n.Add(1)
		}
	}()
	t.Cleanup(func() { l.stop() })
	return l
}

func (l *dialLoop) dials() int64 { return l.n.Load() }

// waitDials polls until the loop has dialled n times.
func (l *dialLoop) waitDials(t testing.TB, n int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for l.n.Load() < n {
		if time.Now().After(deadline) {
			t.Fatalf("the dial loop made %d dials in 10s, want %d", l.n.Load(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// stop ends the loop and says what went wrong: "" when every dial was captured.
func (l *dialLoop) stop() string {
	l.cancel()
	<-l.done
	if n := l.uncaptured.Load(); n > 0 {
		return fmt.Sprintf("%d of %d dials, the first answered %q", n, l.n.Load(), l.first.Load())
	}
	return ""
}
