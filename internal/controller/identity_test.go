// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/plugin"
	"github.com/aether-mesh/aether-operator/internal/resolve"
	"github.com/aether-mesh/aether-operator/internal/testenv"
	"github.com/aether-mesh/aether-operator/internal/workloadidentity"
)

// noIssuerController is the name of the reconciler noIssuerManager runs.
const noIssuerController = "meshservice-noissuer"

// noIssuerManager runs, until the test ends, a manager over isolated namespace ns alone with the
// MeshService controller as cmd/manager runs it with --identity-issuer=none (its Events
// recorded).
func noIssuerManager(t *testing.T, ns string) ctrl.Manager {
	t.Helper()
	return managerOver(t, ns, func(mgr ctrl.Manager) error {
		return (&MeshServiceReconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("aether-controller"),
			MeshDomain: "aether.internal", Issuer: workloadidentity.NoIssuer, controllerName: noIssuerController}).SetupWithManager(mgr)
	})
}

// noIdentityEvents are the TCPRefusedNoIdentity Events on MeshService name.
func noIdentityEvents(t *testing.T, ctx context.Context, ns, name string) []corev1.Event {
	t.Helper()
	var events corev1.EventList
	if err := env.Client.List(ctx, &events, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var out []corev1.Event
	for _, e := range events.Items {
		if e.InvolvedObject.Kind == "MeshService" && e.InvolvedObject.Name == name && e.Reason == meshv1alpha1.ServiceReasonTCPRefusedNoIdentity {
			out = append(out, e)
		}
	}
	return out
}

// expectNoIdentityEvent waits for a Warning TCPRefusedNoIdentity Event on MeshService name whose
// note names the ports, and returns it.
func expectNoIdentityEvent(t *testing.T, ctx context.Context, ns, name, ports string) corev1.Event {
	t.Helper()
	var found corev1.Event
	testenv.Eventually(t, "a Warning "+meshv1alpha1.ServiceReasonTCPRefusedNoIdentity+" Event naming TCP ports "+ports, func() error {
		for _, e := range noIdentityEvents(t, ctx, ns, name) {
			if e.Type == corev1.EventTypeWarning && strings.Contains(e.Message, ports+", and :18082") {
				found = e
				return nil
			}
		}
		return fmt.Errorf("none yet")
	})
	return found
}

// TestWithoutIssuerTCPIsRefused runs the MeshService controller as the manager runs with
// --identity-issuer=none, against the real API server: a service of HTTP 8080 and TCP 9000 gets
// a dial surface whose every raw-TCP spelling (:9000, and :18082, its default TCP port) is
// Refused, no port, its reason saying no workload identity and the fix, while the HTTP rows
// reach what they reach with an issuer (the workload requirements page documents no HTTP
// fallback: its rows stand), the rows as many as ever; and a Warning Event
// TCPRefusedNoIdentity naming the ports and the fix. The Event is news only: a scale-up that
// rewrites the status emits none, a new TCP port emits one naming both ports, and neither
// Event was emitted twice (an Event emitted again grows a series).
func TestWithoutIssuerTCPIsRefused(t *testing.T) {
	ctx := testContext(t)
	ns := isolated(t, ctx, "isolated-noissuer", "payments")
	mgr := noIssuerManager(t, ns)
	endpoint(t, ctx, ns, "payments-0", "payments", healthy, 8080, 8080, "HTTP", 9000, "TCP")
	ms := serviceReady(t, ctx, ns, "payments", 1)

	withIssuer := resolve.DialSurface(plugin.PortSetOf(ms.Status), workloadidentity.SPIRE)
	if len(ms.Status.DialSurface) != len(withIssuer) || len(withIssuer) != resolve.SurfaceLen(2) {
		t.Fatalf("%d dial rows without an issuer, %d with one, want %d: the rows do not change", len(ms.Status.DialSurface), len(withIssuer),
			resolve.SurfaceLen(2))
	}
	refusedTCP := map[string]bool{}
	for i, row := range ms.Status.DialSurface {
		spire := withIssuer[i]
		switch {
		case row.Address != spire.Address:
			t.Errorf("row %d is %s without an issuer, %s with one", i, row.Address, spire.Address)
		case row.Protocol == meshv1alpha1.ProtocolTCP && spire.Outcome == resolve.Reaches:
			if row.Outcome != meshv1alpha1.DialRefused || row.Port != nil || !strings.HasPrefix(row.Reason, "no workload identity") ||
				!strings.Contains(row.Reason, "--identity-issuer=spire") {
				t.Errorf("%s: %s port %d, reason %q; want Refused, no port, for want of a workload identity, with the fix",
					row.Address, row.Outcome, portOf(row.Port), row.Reason)
			}
			refusedTCP[row.Address] = true
		case string(row.Outcome) != string(spire.Outcome) || portOf(row.Port) != spire.Port || row.Reason != spire.Reason:
			t.Errorf("%s: %s port %d (%q) without an issuer; with one %s port %d (%q): a row that is not raw TCP reaching a port must not change",
				row.Address, row.Outcome, portOf(row.Port), row.Reason, spire.Outcome, spire.Port, spire.Reason)
		}
	}
	n := resolve.NamePlaceholder
	if want := map[string]bool{n + ":9000": true, n + ":18082": true}; !maps.Equal(refusedTCP, want) {
		t.Errorf("the raw-TCP rows refused for want of an identity are %v, want %v", refusedTCP, want)
	}
	if row, _ := dialRow(ms, n+":8080"); row.Outcome != meshv1alpha1.DialReaches || portOf(row.Port) != 8080 {
		t.Errorf("<name>:8080 is %s port %d without an issuer, want Reaches 8080 (HTTP is left as it is)", row.Outcome, portOf(row.Port))
	}

	first := expectNoIdentityEvent(t, ctx, ns, "payments", "TCP port 9000")
	for _, w := range []string{"no workload identity", "--identity-issuer=none", "install SPIRE", "--identity-issuer=spire", ":18082"} {
		if !strings.Contains(first.Message, w) {
			t.Errorf("the Event's note %q lacks %q", first.Message, w)
		}
	}

	// A scale-up rewrites the status (two endpoints), refusing the same port: no Event.
	scaleUp(t, ctx, ns, "payments-1", "payments")
	serviceReady(t, ctx, ns, "payments", 2)
	idleController(t, noIssuerController)
	// A new TCP port is news: one Event naming both.
	endpoint(t, ctx, ns, "payments-2", "payments", healthy, 8080, 5432, "TCP", 8080, "HTTP", 9000, "TCP")
	serviceReady(t, ctx, ns, "payments", 3)
	expectNoIdentityEvent(t, ctx, ns, "payments", "TCP ports 5432, 9000")
	idleController(t, noIssuerController)

	events := noIdentityEvents(t, ctx, ns, "payments")
	if d := emittedTwice(events); len(d) > 0 || len(events) != 2 {
		t.Errorf("%d TCPRefusedNoIdentity Events, want 2 (one for 9000, one for 5432 and 9000), each emitted once: %q", len(events), d)
	}
	for _, e := range events {
		t.Logf("Event %s %s: %s", e.Type, e.Reason, e.Message)
	}

	// The negative control: the first Event emitted again, as a controller that warned on every
	// status write would, is caught (each write changes the MeshService's resourceVersion, part of
	// the Event's key, so it is a new Event with the same note).
	ms, err := getMeshService(ctx, ns, "payments")
	if err != nil {
		t.Fatal(err)
	}
	mgr.GetEventRecorder("aether-controller").Eventf(ms, nil, corev1.EventTypeWarning, meshv1alpha1.ServiceReasonTCPRefusedNoIdentity,
		"Reconcile", "%s", first.Message)
	testenv.Eventually(t, "negative control: the Event emitted again is caught", func() error {
		if d := emittedTwice(noIdentityEvents(t, ctx, ns, "payments")); len(d) > 0 {
			t.Logf("negative control: %s", d[0])
			return nil
		}
		return fmt.Errorf("not caught yet")
	})
}

// emittedTwice says which Events were emitted more than once: two Events with one note, or one
// Event that grew a series.
func emittedTwice(events []corev1.Event) []string {
	var out []string
	seen := map[string]bool{}
	for _, e := range events {
		if seen[e.Message] {
			out = append(out, "two Events say "+fmt.Sprintf("%q", e.Message))
		}
		seen[e.Message] = true
		if e.Series != nil || e.Count > 1 {
			out = append(out, fmt.Sprintf("the Event %q has a series (%+v, count %d)", e.Message, e.Series, e.Count))
		}
	}
	return out
}

// TestTCPRefusalNews: the Warning is news when the status just written refuses TCP ports for want
// of an identity and the one before did not refuse the same ones; the same refusal written again
// (a scale-up, a manager restart) is not news, nor is a status with an issuer.
func TestTCPRefusalNews(t *testing.T) {
	n := resolve.NamePlaceholder
	status := func(refused bool, tcp ...int32) meshv1alpha1.MeshServiceStatus {
		var st meshv1alpha1.MeshServiceStatus
		for _, p := range tcp {
			st.Ports = append(st.Ports, meshv1alpha1.ServicePort{Port: p, Protocol: meshv1alpha1.ProtocolTCP})
			row := meshv1alpha1.Dial{Address: fmt.Sprintf("%s:%d", n, p), Protocol: meshv1alpha1.ProtocolTCP, Outcome: meshv1alpha1.DialReaches, Port: &p}
			if refused {
				row.Outcome, row.Port = meshv1alpha1.DialRefused, nil
			}
			st.DialSurface = append(st.DialSurface, row)
		}
		return st
	}
	cases := map[string]struct {
		before, after meshv1alpha1.MeshServiceStatus
		news          bool
	}{
		"a new service without an issuer":   {before: status(false), after: status(true, 9000), news: true},
		"the manager restarted without one": {before: status(false, 9000), after: status(true, 9000), news: true},
		"the same refusal written again":    {before: status(true, 9000), after: status(true, 9000)},
		"a TCP port added":                  {before: status(true, 9000), after: status(true, 5432, 9000), news: true},
		"a TCP port gone, one left":         {before: status(true, 5432, 9000), after: status(true, 9000), news: true},
		"with an issuer":                    {before: status(false), after: status(false, 9000)},
		"the issuer back":                   {before: status(true, 9000), after: status(false, 9000)},
		"no TCP port left":                  {before: status(true, 9000), after: status(true)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if _, news := tcpRefusalNews(tc.before, tc.after); news != tc.news {
				t.Errorf("news = %v, want %v", news, tc.news)
			}
		})
	}
}
