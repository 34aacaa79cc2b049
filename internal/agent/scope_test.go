// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/conditions"
	"github.com/aether-mesh/aether-operator/internal/portspec"
	"github.com/aether-mesh/aether-operator/internal/testenv"
)

// listenCounting accepts TCP connections on ip (loopback) at a free port, counting them.
func listenCounting(t *testing.T, ip string) (port int32, accepted *atomic.Int32) {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	accepted = new(atomic.Int32)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			_ = c.Close()
		}
	}()
	return int32(l.Addr().(*net.TCPAddr).Port), accepted
}

// createTCPEndpoint writes a MeshEndpoint of node straight to the API server (as a node's agent
// would), its TCP primary port at ip:port.
func createTCPEndpoint(t testing.TB, ctx context.Context, ns, name, service, node, ip string, port int32) *meshEndpoint {
	t.Helper()
	ep := &meshEndpoint{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: meshv1alpha1.MeshEndpointSpec{ServiceName: service, PodName: name, PodUID: "uid-" + name, NodeName: node,
			Address: ip, PrimaryPort: port, Ports: []meshv1alpha1.PortProtocol{{Port: port, Protocol: meshv1alpha1.ProtocolTCP}}},
	}
	if err := env.Client.Create(ctx, ep); err != nil {
		t.Fatal(err)
	}
	return ep
}

// TestProberProbesOnlyItsNode: a prober whose client sees every node's MeshEndpoints (the direct
// client, as a cluster-wide view would) probes and writes only its own node's; another node's
// endpoint, reachable and in the same list, gets no connection and no health.
func TestProberProbesOnlyItsNode(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t, ctx)
	node, elsewhere := "node-"+ns, "other-"+ns // no agent serves either
	ownIP, otherIP := newPodIP(), newPodIP()
	ownPort, ownConns := listenCounting(t, ownIP)
	otherPort, otherConns := listenCounting(t, otherIP)
	createTCPEndpoint(t, ctx, ns, "own", "payments", node, ownIP, ownPort)
	createTCPEndpoint(t, ctx, ns, "foreign", "payments", elsewhere, otherIP, otherPort)

	p := &Prober{Client: env.Client, NodeName: node, Options: testHealth, states: map[types.UID]*probeState{}}
	testenv.Eventually(t, "own endpoint probed Healthy", func() error {
		p.round(ctx) // every round probes every endpoint it keeps, concurrently, before it returns
		ep, err := getEndpoint(ctx, ns, "own")
		if err != nil {
			return err
		}
		if ep.Status.Health != meshv1alpha1.HealthHealthy {
			return fmt.Errorf("health %q", ep.Status.Health)
		}
		return nil
	})
	if ownConns.Load() == 0 {
		t.Fatal("the own endpoint is Healthy without a connection: the test proves nothing")
	}
	foreign, err := getEndpoint(ctx, ns, "foreign")
	if err != nil {
		t.Fatal(err)
	}
	if n := otherConns.Load(); n != 0 || foreign.Status.Health != "" {
		t.Errorf("another node's endpoint was probed %d times and got health %q; want no probe and no health", n, foreign.Status.Health)
	}
}

// TestPodReconcilerTouchesOnlyItsNode: a pod reconciler whose client sees every node's pods and
// MeshEndpoints leaves another node's registered pod and its endpoint as they are, and registers
// no endpoint for another node's unregistered pod.
func TestPodReconcilerTouchesOnlyItsNode(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t, ctx)
	node, elsewhere := "node-"+ns, "other-"+ns // no agent serves either
	annotations := map[string]string{portspec.AnnotationPorts: "9000=tcp"}
	registeredIP := newPodIP()
	pod := createPod(t, ctx, ns, "registered", elsewhere, registeredIP, true, annotations)
	ep := createTCPEndpoint(t, ctx, ns, "registered", "payments", elsewhere, registeredIP, 9000)
	createPod(t, ctx, ns, "unregistered", elsewhere, newPodIP(), true, annotations)

	r := &PodReconciler{Client: env.Client, NodeName: node}
	for _, name := range []string{"registered", "unregistered"} {
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: name}}); err != nil {
			t.Fatalf("reconcile %s: %v", name, err)
		}
	}

	after, err := getEndpoint(ctx, ns, "registered")
	switch {
	case apierrors.IsNotFound(err):
		t.Fatalf("another node's MeshEndpoint (pod %s on %s) was deleted by the agent of %s", pod.Name, elsewhere, node)
	case err != nil:
		t.Fatal(err)
	case after.UID != ep.UID || after.Generation != ep.Generation || after.Status.Health != "" ||
		conditions.Find(after.Status.Conditions, meshv1alpha1.EndpointConditionRegistered) != nil:
		t.Errorf("another node's MeshEndpoint was written: uid %s→%s, generation %d→%d, health %q, conditions %+v",
			ep.UID, after.UID, ep.Generation, after.Generation, after.Status.Health, after.Status.Conditions)
	}
	if _, err := getEndpoint(ctx, ns, "unregistered"); !apierrors.IsNotFound(err) {
		t.Errorf("another node's pod got a MeshEndpoint from the agent of %s (get: %v)", node, err)
	}
}
