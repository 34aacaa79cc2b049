// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/capture/apply"
	"github.com/aether-mesh/aether-operator/internal/capture/apply/nstest"
	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/portspec"
	"github.com/aether-mesh/aether-operator/internal/testenv"
)

// testResync is the capture resync of these tests: repairs are awaited by polling, never slept.
const testResync = 200 * time.Millisecond

// withCapture turns capture on with applier, the test resync and no netns template (capture
// reads only the namespaces handed over: the registry).
func withCapture(applier *apply.Applier) func(*XDSOptions) {
	return func(o *XDSOptions) {
		o.NetNSPathTemplate = nil
		o.Capture = &CaptureOptions{Resync: testResync, Applier: applier}
	}
}

// paymentsAnnotations declare payments: HTTP 8080 (primary), TCP 9000 (its default TCP port,
// the lowest) and TCP 9001; the pod excludes outbound port 5432.
func paymentsAnnotations() map[string]string {
	return map[string]string{portspec.AnnotationPort: "8080", portspec.AnnotationPorts: "8080,9000=tcp,9001=tcp",
		portspec.AnnotationExcludeOutboundPorts: "5432"}
}

// serviceVIP waits for MeshService ns/name to have a VIP.
func serviceVIP(t *testing.T, ctx context.Context, ns, name string) string {
	t.Helper()
	var vip string
	testenv.Eventually(t, "MeshService "+name+" has a VIP", func() error {
		ms := &meshv1alpha1.MeshService{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, ms); err != nil {
			return err
		}
		if vip = ms.Status.VIP; vip == "" {
			return fmt.Errorf("no VIP yet")
		}
		return nil
	})
	return vip
}

func captureSyncsTotal(t *testing.T, result apply.Result) float64 {
	t.Helper()
	n, err := testenv.Counter("aether_agent_capture_syncs_total", "result", string(result))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// dialsTo waits until a dial from pns to address answers want.
func dialsTo(t *testing.T, pns *nstest.NS, address, want string) {
	t.Helper()
	testenv.Eventually(t, fmt.Sprintf("a dial to %s answers %q", address, want), func() error {
		if got := pns.Dial(address); got != want {
			return fmt.Errorf("it answers %q", got)
		}
		return nil
	})
}

// warningEvents are the Warning Events of reason in ns regarding name.
func warningEvents(ctx context.Context, ns, name, reason string) ([]eventsv1.Event, error) {
	var events eventsv1.EventList
	if err := env.Client.List(ctx, &events, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	var out []eventsv1.Event
	for _, e := range events.Items {
		if e.Reason == reason && e.Regarding.Name == name && e.Type == corev1.EventTypeWarning {
			out = append(out, e)
		}
	}
	return out, nil
}

// TestCapture: an agent with capture programs a meshed pod's namespace as soon as the CNI plugin
// hands it over (the registry), from the mesh it builds for xDS: in the default mode a dial from
// the pod to its service's VIP:9000 reaches 127.0.0.1:18001 with that original destination, and
// an excluded port is left alone. A table flushed by hand is repaired within a resync. The pod's
// annotation moving it to scoped mode changes its rules, and the service, whose TCP port 9001
// :18082 does not reach, gets one Warning Event. A pod whose namespace cannot be programmed gets a
// CaptureFailed Event. The registry forgetting a pod (CNI DEL) drops its state; a pod leaving the
// mesh loses its table.
func TestCapture(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t, ctx)
	applier := apply.New()
	a := startXDSAgent(t, ns, withCapture(applier))
	pod := createPod(t, ctx, ns, "client", a.node, newPodIP(), true, paymentsAnnotations())
	vip := serviceVIP(t, ctx, ns, "payments")
	pns := nstest.New(t, vip)
	pns.Serve(t, 9000, 9001, 5432, 18082)
	applied := captureSyncsTotal(t, apply.Applied)

	if err := a.options.XDS.NetNS.Record(pod.UID, pns.Path); err != nil {
		t.Fatal(err)
	}
	dialsTo(t, pns, vip+":9000", nstest.Captured+" "+vip+":9000")
	for address, want := range map[string]string{
		vip + ":9001": nstest.Captured + " " + vip + ":9001",
		vip + ":5432": nstest.Direct + " " + vip + ":5432", // aether.io/exclude-outbound-ports
	} {
		if got := pns.Dial(address); got != want {
			t.Errorf("dial %s: %q, want %q", address, got, want)
		}
	}
	// The batch lands (the dial is captured) just before the capturer counts it: poll.
	testenv.Eventually(t, "the sync counted", func() error {
		if n := captureSyncsTotal(t, apply.Applied); n <= applied {
			return fmt.Errorf("aether_agent_capture_syncs_total{result=applied} is %v, was %v", n, applied)
		}
		return nil
	})

	t.Run("a table flushed by hand is repaired within a resync", func(t *testing.T) {
		repaired := captureSyncsTotal(t, apply.Repaired)
		pns.Nft(t, "flush", "table", "inet", "aether")
		dialsTo(t, pns, vip+":9000", nstest.Captured+" "+vip+":9000")
		// The batch lands (the dial is captured again) just before the capturer counts it: poll.
		testenv.Eventually(t, "the repair counted", func() error {
			if n := captureSyncsTotal(t, apply.Repaired); n <= repaired {
				return fmt.Errorf("aether_agent_capture_syncs_total{result=repaired} is %v, was %v", n, repaired)
			}
			return nil
		})
	})

	t.Run("scoped mode, and the service's warning", func(t *testing.T) {
		patch := client.MergeFrom(pod.DeepCopy())
		pod.Annotations[model.AnnotationCaptureMode] = string(model.CaptureScoped)
		if err := env.Client.Patch(ctx, pod, patch); err != nil {
			t.Fatal(err)
		}
		dialsTo(t, pns, vip+":9000", nstest.Direct+" "+vip+":9000")
		if got, want := pns.Dial(vip+":18082"), nstest.Captured+" "+vip+":18082"; got != want {
			t.Errorf("dial :18082 in scoped mode: %q, want %q", got, want)
		}
		testenv.Eventually(t, "one ScopedPortsUncaptured Event on MeshService payments", func() error {
			events, err := warningEvents(ctx, ns, "payments", ReasonScopedPortsUncaptured)
			switch {
			case err != nil:
				return err
			case len(events) != 1:
				return fmt.Errorf("%d Events", len(events))
			case events[0].Regarding.Kind != "MeshService" || events[0].Regarding.UID == "":
				return fmt.Errorf("the Event regards %+v", events[0].Regarding)
			case !strings.Contains(events[0].Note, "TCP ports 9001 of "+ns+"/payments") || !strings.Contains(events[0].Note, ns+"/client"):
				return fmt.Errorf("the Event says %q", events[0].Note)
			}
			return nil
		})
		// Another rebuild says nothing new.
		patch = client.MergeFrom(pod.DeepCopy())
		pod.Annotations["touch"] = "1"
		if err := env.Client.Patch(ctx, pod, patch); err != nil {
			t.Fatal(err)
		}
		builds := buildsTotal(t)
		testenv.Eventually(t, "a rebuild", func() error {
			if buildsTotal(t) <= builds {
				return fmt.Errorf("no rebuild yet")
			}
			return nil
		})
		if events, err := warningEvents(ctx, ns, "payments", ReasonScopedPortsUncaptured); err != nil || len(events) != 1 {
			t.Errorf("after another rebuild: %d Events (%v), want still 1", len(events), err)
		}
	})

	t.Run("a namespace that cannot be programmed", func(t *testing.T) {
		broken := createPod(t, ctx, ns, "broken", a.node, newPodIP(), true, paymentsAnnotations())
		notNetNS := filepath.Join(t.TempDir(), "not-a-netns")
		if err := os.WriteFile(notNetNS, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		failed := captureSyncsTotal(t, apply.Failed)
		if err := a.options.XDS.NetNS.Record(broken.UID, notNetNS); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, "a CaptureFailed Event on pod broken", func() error {
			events, err := warningEvents(ctx, ns, "broken", ReasonCaptureFailed)
			switch {
			case err != nil:
				return err
			case len(events) != 1:
				return fmt.Errorf("%d Events", len(events))
			case !strings.Contains(events[0].Note, notNetNS):
				return fmt.Errorf("the Event says %q", events[0].Note)
			}
			t.Logf("the Event says: %s", events[0].Note)
			return nil
		})
		if n := captureSyncsTotal(t, apply.Failed); n <= failed {
			t.Errorf("aether_agent_capture_syncs_total{result=failed} is %v, was %v", n, failed)
		}
		a.options.XDS.NetNS.Forget(broken.UID) // CNI DEL
		testenv.Eventually(t, "the applier forgets the broken pod's namespace", func() error {
			if slices.Contains(applier.Namespaces(), notNetNS) {
				return fmt.Errorf("it still knows %s", notNetNS)
			}
			return nil
		})
	})

	t.Run("a pod that leaves the mesh loses its table", func(t *testing.T) {
		patch := client.MergeFrom(pod.DeepCopy())
		delete(pod.Labels, LabelManaged)
		if err := env.Client.Patch(ctx, pod, patch); err != nil {
			t.Fatal(err)
		}
		dialsTo(t, pns, vip+":18082", nstest.Direct+" "+vip+":18082")
		if slices.Contains(applier.Namespaces(), pns.Path) {
			t.Errorf("the applier still knows %s", pns.Path)
		}
		if out := pns.Nft(t, "list", "tables"); strings.Contains(out, "aether") {
			t.Errorf("nft still lists the table: %s", out)
		}
	})
}

// TestCaptureProgram: the CNI hand-over's Program refuses before the agent listed the mesh (the
// kubelet retries), then programs the pod's namespace before it returns, from the mesh of the
// last rebuild.
func TestCaptureProgram(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t, ctx)
	a := startXDSAgent(t, ns, withCapture(apply.New()))
	pod := createPod(t, ctx, ns, "client", a.node, newPodIP(), true, paymentsAnnotations())
	vip := serviceVIP(t, ctx, ns, "payments")
	pns := nstest.New(t, vip)
	pns.Serve(t, 9000)

	p := newPublisher(a.mgr.GetCache(), a.mgr.GetClient(), logr.Discard(), a.options)
	if err := p.capture.Program(ctx, pod, pns.Path); err != errCaptureNotReady {
		t.Fatalf("Program before any rebuild: %v, want %v", err, errCaptureNotReady)
	}
	testenv.Eventually(t, "the publisher lists payments with its VIP", func() error {
		m, err := p.mesh(ctx)
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(m.Services, func(s model.Service) bool { return s.Name == "payments" && s.VIP == vip && len(s.Ports) == 3 }) {
			return fmt.Errorf("not yet")
		}
		return p.syncCapture(ctx, m)
	})
	if err := p.capture.Program(ctx, pod, pns.Path); err != nil {
		t.Fatalf("Program: %v", err)
	}
	if got, want := pns.Dial(vip+":9000"), nstest.Captured+" "+vip+":9000"; got != want {
		t.Errorf("right after Program, dial %s:9000: %q, want %q", vip, got, want)
	}
}
