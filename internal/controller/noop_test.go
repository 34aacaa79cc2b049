// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/testenv"
)

// reconciles is how many times the meshservice controller has reconciled, from its own metric.
func reconciles(t *testing.T) float64 {
	t.Helper()
	return meshServiceCount(t, "controller_runtime_reconcile_total")
}

// meshServiceCount reads counter metric of the meshservice controller (its "controller" label).
func meshServiceCount(t *testing.T, metric string) float64 {
	t.Helper()
	n, err := testenv.Counter(metric, "controller", "meshservice")
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestResyncWritesNothing: reconciling a converged service changes no resourceVersion. The
// negative control at the end shows the same check catches a write.
func TestResyncWritesNothing(t *testing.T) {
	ctx := testContext(t)
	ns := namespaceWithSA(t, ctx, "quiet")
	ep := endpoint(t, ctx, ns, "quiet-0", "quiet", healthy, 8080, 8080, "HTTP", 9000, "TCP")
	serviceReady(t, ctx, ns, "quiet", 1)
	testenv.Settle(t, "meshservice", 0) // the reconciles the setup queued are done: the versions below are final

	versions := func() (string, string) {
		ms, err := getMeshService(ctx, ns, "quiet")
		if err != nil {
			t.Fatal(err)
		}
		svc := &corev1.Service{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "quiet"}, svc); err != nil {
			t.Fatal(err)
		}
		return ms.ResourceVersion, svc.ResourceVersion
	}
	msRV, svcRV := versions()

	// Three reconciles of the converged service: through the ServiceAccount, the endpoint and the
	// MeshService's own watch.
	before := reconciles(t)
	sa := &corev1.ServiceAccount{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "quiet"}, sa); err != nil {
		t.Fatal(err)
	}
	sa.Labels = map[string]string{"touched": "1"}
	if err := env.Client.Update(ctx, sa); err != nil {
		t.Fatal(err)
	}
	ep.Labels = map[string]string{"touched": "1"}
	if err := env.Client.Update(ctx, ep); err != nil {
		t.Fatal(err)
	}
	testenv.Settle(t, "meshservice", before+2)
	if m, s := versions(); m != msRV || s != svcRV {
		t.Errorf("a resync wrote: MeshService %s → %s, Service %s → %s", msRV, m, svcRV, s)
	}

	// Negative control: a real change is written, and the same comparison sees it.
	ep.Status.Health = meshv1alpha1.HealthUnhealthy
	if err := env.Client.Status().Update(ctx, ep); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the health change is written", func() error {
		if m, _ := versions(); m == msRV {
			return fmt.Errorf("MeshService resourceVersion still %s", m)
		}
		return nil
	})
}

// TestKubectlDescribeAndWait reads a MeshService the way a user does: kubectl wait for Ready,
// then kubectl describe, which must show per-port conditions, each name once and the dial
// surface once, written for any name as <name>, its 421 rows with their x-aether-error.
func TestKubectlDescribeAndWait(t *testing.T) {
	ctx := testContext(t)
	ns := namespaceWithSA(t, ctx, "payments")
	endpoint(t, ctx, ns, "payments-0", "payments", healthy, 8080, 8080, "HTTP", 9000, "TCP", 9090, "HTTP2")
	// kubectl wait needs the object to exist; the controller creates it.
	testenv.Eventually(t, "MeshService created", func() error { _, err := getMeshService(ctx, ns, "payments"); return err })
	if out, stderr, err := env.Kubectl(ctx, "wait", "--for=condition=Ready", "meshservice/payments", "-n", ns, "--timeout=60s"); err != nil {
		t.Fatalf("kubectl wait: %v\n%s%s", err, out, stderr)
	}
	out, stderr, err := env.Kubectl(ctx, "describe", "meshservice", "payments", "-n", ns)
	if err != nil {
		t.Fatalf("kubectl describe: %v\n%s", err, stderr)
	}
	for _, want := range []string{
		"Default TCPPort: 9000",
		"Dial Surface:",
		"Address: http://<name>/ Error: port-not-declared Outcome: Misdirected Protocol: HTTP " +
			"Reason: no port in the authority means port 80, and port 80 is not declared: answered 421 with x-aether-error: port-not-declared; " +
			"<name> serves HTTP on 8080 and 9090: dial http://<name>:8080/ or http://<name>:9090/",
		"Address: <name>:18081 Outcome: HostDecides Protocol: HTTP",
		"Address: Host: <name>:9000 Error: port-not-http Outcome: Misdirected",
		"Address: <name>:18082 Outcome: Reaches Port: 9000 Protocol: TCP " +
			"Reason: the default TCP port: port 9000 is the lowest TCP port (the primary is not TCP)",
		"Names: payments." + ns + ".aether.internal payments." + ns + ".svc.cluster.local payments." + ns + " ",
		"Type: ProtocolConsistent",
		"every endpoint declares port 9090 as HTTP2",
		"1 of 1 endpoints serving port 9000 as TCP are ready",
		"Identity: spiffe://aether.internal/ns/" + ns + "/sa/payments",
	} {
		// describe aligns values in columns; compare with runs of spaces collapsed.
		if !strings.Contains(strings.Join(strings.Fields(out), " "), strings.Join(strings.Fields(want), " ")) {
			t.Errorf("kubectl describe does not show %q", want)
		}
	}
	// Each name once (in Names), each spelling once: no row repeats the surface per name.
	for _, name := range []string{"." + ns + ".aether.internal", "." + ns + ".svc.cluster.local"} {
		if n := strings.Count(out, name); n != 1 {
			t.Errorf("kubectl describe shows %q %d times, want once", name, n)
		}
	}
	if n := strings.Count(out, "Address:"); n != 2*3+10 {
		t.Errorf("kubectl describe shows %d dial rows, want 2 × 3 ports + 10 = 16", n)
	}
	if !strings.Contains(out, "<name>:18082/udp") {
		t.Errorf("kubectl describe does not show the UDP row <name>:18082/udp")
	}
	if strings.Contains(out, "Default HTTPPort") {
		t.Errorf("kubectl describe shows a default HTTP port; 80 is not declared, so there is none")
	}
	if t.Failed() {
		t.Logf("kubectl describe printed:\n%s", out)
	}
}
