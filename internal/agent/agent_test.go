// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"fmt"
	"maps"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/conditions"
	"github.com/aether-mesh/aether-operator/internal/portspec"
	"github.com/aether-mesh/aether-operator/internal/testenv"
)

type meshEndpoint = meshv1alpha1.MeshEndpoint

// TestRegistration: pods on the agent's node get MeshEndpoints with their ports, protocols,
// locality and metadata; pods on another node and unmanaged pods get none.
func TestRegistration(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t, ctx)
	annotations := map[string]string{
		portspec.AnnotationPort: "8080", portspec.AnnotationPorts: "8080,9090=grpc,9000=tcp",
		portspec.AnnotationHealthPath: "/healthz", portspec.AnnotationWeight: "200",
		portspec.AnnotationMetadataPrefix + "version": "v2",
	}
	// The two pods that must get nothing come first: the agent's pod watch delivers events in
	// the order they happened, so once mixed is registered the agent has been told of them (of
	// elsewhere only if its cache were not limited to its node).
	before := reconciles(t, "agent-pods")
	createPod(t, ctx, ns, "elsewhere", "node-b", newPodIP(), true, annotations)
	createPod(t, ctx, ns, "unmanaged", testNode, newPodIP(), false, annotations)
	pod := createPod(t, ctx, ns, "mixed", testNode, newPodIP(), true, annotations)

	ep := registeredEndpoint(t, ctx, ns, "mixed", "MeshEndpoint mixed, Registered")
	want := meshv1alpha1.MeshEndpointSpec{
		ServiceName: "payments", PodName: "mixed", PodUID: string(pod.UID), NodeName: testNode,
		Address: pod.Status.PodIP, PrimaryPort: 8080,
		Ports: []meshv1alpha1.PortProtocol{
			{Port: 8080, Protocol: meshv1alpha1.ProtocolHTTP}, {Port: 9000, Protocol: meshv1alpha1.ProtocolTCP}, {Port: 9090, Protocol: meshv1alpha1.ProtocolHTTP2, AppProtocol: meshv1alpha1.AppProtocolGRPC},
		},
		PortsSummary: "8080/HTTP,9000/TCP,9090/HTTP2", Weight: 200,
		HealthCheck: meshv1alpha1.HealthCheck{Mode: meshv1alpha1.HealthCheckEDS, Path: "/healthz"},
		Metadata:    map[string]string{"version": "v2"},
		Locality:    meshv1alpha1.Locality{Region: "eu-west-1", Zone: "eu-west-1a"},
	}
	if fmt.Sprint(ep.Spec) != fmt.Sprint(want) {
		t.Errorf("spec:\n got %+v\nwant %+v", ep.Spec, want)
	}
	if len(ep.OwnerReferences) != 1 || ep.OwnerReferences[0].UID != pod.UID {
		t.Errorf("owner references %+v, want the pod", ep.OwnerReferences)
	}
	written := false
	for _, m := range ep.ManagedFields {
		written = written || (m.Manager == FieldManager && m.Subresource == "")
	}
	if !written {
		t.Errorf("spec not written by field manager %s: %+v", FieldManager, ep.ManagedFields)
	}

	// Every request the agent took in is reconciled (unmanaged and mixed at least): what it did
	// with the other two is done.
	testenv.Settle(t, "agent-pods", before+2)
	for _, name := range []string{"elsewhere", "unmanaged"} {
		if _, err := getEndpoint(ctx, ns, name); !apierrors.IsNotFound(err) {
			t.Errorf("pod %s got a MeshEndpoint (%v)", name, err)
		}
	}
}

// refusals reads the refused-pods counter for one kind.
func refusals(t *testing.T, kind portspec.Kind) float64 {
	t.Helper()
	n, err := testenv.Counter("aether_agent_refused_pods_total", "reason", string(kind))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func podEvent(t *testing.T, ns, pod, message string) error {
	return podEventOf(t, ns, pod, ReasonInvalidAnnotation, message)
}

func podEventOf(t *testing.T, ns, pod, reason, message string) error {
	var events corev1.EventList
	if err := env.Client.List(testContext(t), &events, client.InNamespace(ns)); err != nil {
		return err
	}
	for _, e := range events.Items {
		if e.InvolvedObject.Kind == "Pod" && e.InvolvedObject.Name == pod && e.Type == corev1.EventTypeWarning &&
			e.Reason == reason && e.Message == message {
			return nil
		}
	}
	return fmt.Errorf("no Warning %s Event on pod %s with message %q among %d events", reason, pod, message, len(events.Items))
}

// TestRefusal: a pod whose annotations do not parse gets no MeshEndpoint but an Event with the
// parser's text and a count; a registered pod edited into an invalid state keeps its last good
// MeshEndpoint with Registered=False; fixing it clears the condition.
func TestRefusal(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t, ctx)
	bad := map[string]string{portspec.AnnotationPorts: "8080,9000=tpc"}
	_, parseErr := portspec.Parse(bad)
	before := refusals(t, portspec.KindUnknownSuffix)
	createPod(t, ctx, ns, "typo", testNode, newPodIP(), true, bad)
	testenv.Eventually(t, "the refusal Event", func() error { return podEvent(t, ns, "typo", parseErr.Error()) })
	// The counter moves after every write of the refusal (refuse.go), so just after the Event.
	testenv.Eventually(t, "the refusal counted", func() error {
		if got := refusals(t, portspec.KindUnknownSuffix) - before; got != 1 {
			return fmt.Errorf("refusals counted: %v, want 1", got)
		}
		return nil
	})
	if _, err := getEndpoint(ctx, ns, "typo"); !apierrors.IsNotFound(err) {
		t.Errorf("a refused pod got a MeshEndpoint (%v)", err)
	}

	good := createPod(t, ctx, ns, "edited", testNode, newPodIP(), true, map[string]string{portspec.AnnotationPorts: "8080,9000=tcp"})
	var ep *meshEndpoint
	testenv.Eventually(t, "MeshEndpoint edited", func() (err error) { ep, err = getEndpoint(ctx, ns, "edited"); return err })
	lastGood := ep.Spec

	good.Annotations = maps.Clone(bad)
	if err := env.Client.Update(ctx, good); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "Registered=False InvalidAnnotation", func() error {
		ep, _ = getEndpoint(ctx, ns, "edited")
		c := conditions.Find(ep.Status.Conditions, meshv1alpha1.EndpointConditionRegistered)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != meshv1alpha1.EndpointReasonInvalidAnnotation ||
			!strings.Contains(c.Message, parseErr.Error()) {
			return fmt.Errorf("%+v", c)
		}
		return nil
	})
	if fmt.Sprint(ep.Spec) != fmt.Sprint(lastGood) {
		t.Errorf("the last valid registration changed:\n%+v\n%+v", ep.Spec, lastGood)
	}
	testenv.Eventually(t, "the Event on the edited pod", func() error { return podEvent(t, ns, "edited", parseErr.Error()) })

	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(good), good); err != nil {
		t.Fatal(err)
	}
	good.Annotations = map[string]string{portspec.AnnotationPorts: "8080,9000=tcp,9090=h2"}
	if err := env.Client.Update(ctx, good); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "fixed: Registered=True with the new ports", func() error {
		ep, _ = getEndpoint(ctx, ns, "edited")
		c := conditions.Find(ep.Status.Conditions, meshv1alpha1.EndpointConditionRegistered)
		if c == nil || c.Status != metav1.ConditionTrue || ep.Spec.PortsSummary != "8080/HTTP,9000/TCP,9090/HTTP2" {
			return fmt.Errorf("%+v %s", c, ep.Spec.PortsSummary)
		}
		return nil
	})

	// Broken again the same way: a new refusal, said and counted again.
	before = refusals(t, portspec.KindUnknownSuffix)
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(good), good); err != nil {
		t.Fatal(err)
	}
	good.Annotations = maps.Clone(bad)
	if err := env.Client.Update(ctx, good); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "a second Event on the pod broken again", func() error {
		events, err := refusalEvents(ctx, good)
		if err != nil {
			return err
		}
		if len(events) != 2 {
			return fmt.Errorf("%d refusal Events", len(events))
		}
		return nil
	})
	testenv.Eventually(t, "the second refusal counted", func() error {
		if got := refusals(t, portspec.KindUnknownSuffix) - before; got != 1 {
			return fmt.Errorf("counted %v times", got)
		}
		return nil
	})
}

func healthIs(t *testing.T, ns, name string, want meshv1alpha1.Health) {
	t.Helper()
	testenv.Eventually(t, name+" "+string(want), func() error {
		ep, err := getEndpoint(testContext(t), ns, name)
		if err != nil {
			return err
		}
		if ep.Status.Health != want {
			return fmt.Errorf("health %q", ep.Status.Health)
		}
		return nil
	})
}

// TestHealthFollowsARealListener: TCP connect for a TCP primary, HTTP GET of the health path for
// an HTTP primary, on loopback addresses standing in for pod IPs; and the MeshService's ready
// count follows.
func TestHealthFollowsARealListener(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t, ctx)

	tcpIP := newPodIP()
	tcpPort, stopTCP := listenTCP(t, tcpIP)
	createPod(t, ctx, ns, "tcp", testNode, tcpIP, true, map[string]string{
		portspec.AnnotationProtocol: "tcp", portspec.AnnotationPort: strconv.Itoa(tcpPort),
	})
	httpIP := newPodIP()
	httpPort, stopHTTP := listenHTTP(t, httpIP, "/healthz")
	createPod(t, ctx, ns, "http", testNode, httpIP, true, map[string]string{
		portspec.AnnotationPort: strconv.Itoa(httpPort), portspec.AnnotationHealthPath: "/healthz",
		// a TCP secondary nothing listens on: one health per pod, decided by the primary
		portspec.AnnotationPorts: strconv.Itoa(httpPort) + ",5432=tcp",
	})
	wrongPathIP := newPodIP()
	wrongPort, _ := listenHTTP(t, wrongPathIP, "/healthz")
	createPod(t, ctx, ns, "wrong-path", testNode, wrongPathIP, true, map[string]string{
		portspec.AnnotationPort: strconv.Itoa(wrongPort), portspec.AnnotationHealthPath: "/ready",
	})

	healthIs(t, ns, "tcp", meshv1alpha1.HealthHealthy)
	healthIs(t, ns, "http", meshv1alpha1.HealthHealthy)
	healthIs(t, ns, "wrong-path", meshv1alpha1.HealthUnhealthy) // 404 on /ready

	paymentsCounts(t, ctx, ns, meshv1alpha1.EndpointCounts{Ready: 2, Total: 3})

	stopTCP()
	stopHTTP()
	healthIs(t, ns, "tcp", meshv1alpha1.HealthUnhealthy)
	healthIs(t, ns, "http", meshv1alpha1.HealthUnhealthy)
	paymentsCounts(t, ctx, ns, meshv1alpha1.EndpointCounts{Ready: 0, Total: 3})
}

// paymentsCounts waits until MeshService payments in ns counts want.
func paymentsCounts(t *testing.T, ctx context.Context, ns string, want meshv1alpha1.EndpointCounts) {
	t.Helper()
	testenv.Eventually(t, fmt.Sprintf("MeshService payments %d/%d ready", want.Ready, want.Total), func() error {
		ms := &meshv1alpha1.MeshService{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "payments"}, ms); err != nil {
			return err
		}
		if ms.Status.Endpoints != want {
			return fmt.Errorf("%+v", ms.Status.Endpoints)
		}
		return nil
	})
}

// TestDraining: a pod held by a finalizer while being deleted, with a preStop sleep, is Draining
// at once; when the pod is gone, so is its MeshEndpoint.
func TestDraining(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t, ctx)
	ip := newPodIP()
	port, _ := listenTCP(t, ip)
	// A preStop sleep of 60 s keeps it in drain phase 1 (Draining) for 59 s (drain_test.go).
	pod := createTerminablePod(t, ctx, ns, "leaving", testNode, ip, port, 60, 90, "example.com/hold")
	healthIs(t, ns, "leaving", meshv1alpha1.HealthHealthy)
	// The MeshService controller's verdict is a write of its own: settled first, so that the
	// rounds below watch the agent alone (TestTwoPhaseDrain).
	verdictIs(t, ns, "leaving", metav1.ConditionTrue)
	// A pod beside it whose listener counts the prober's rounds: each round probes it once.
	witnessIP := newPodIP()
	witnessPort, probes, stopWitness := listenTCPCounting(t, witnessIP)
	createPod(t, ctx, ns, "witness", testNode, witnessIP, true,
		map[string]string{portspec.AnnotationProtocol: "tcp", portspec.AnnotationPort: strconv.Itoa(witnessPort)})
	healthIs(t, ns, "witness", meshv1alpha1.HealthHealthy)

	if err := env.Client.Delete(ctx, pod); err != nil {
		t.Fatal(err)
	}
	healthIs(t, ns, "leaving", meshv1alpha1.HealthDraining)
	draining, err := getEndpoint(ctx, ns, "leaving")
	if err != nil {
		t.Fatal(err)
	}
	// The prober leaves a draining endpoint alone: three whole rounds after it was Draining write
	// nothing to it. Rounds run one after another, so the witness's fourth probe from now starts
	// a round after three that finished.
	probeRounds(t, probes, 4)
	ep, err := getEndpoint(ctx, ns, "leaving")
	if err != nil {
		t.Fatal(err)
	}
	if ep.ResourceVersion != draining.ResourceVersion || ep.Status.Health != meshv1alpha1.HealthDraining {
		t.Errorf("the prober wrote a draining endpoint: resourceVersion %s → %s, health %q", draining.ResourceVersion, ep.ResourceVersion, ep.Status.Health)
	}
	// The control: in the same rounds, an endpoint that is not draining is probed and written.
	stopWitness()
	healthIs(t, ns, "witness", meshv1alpha1.HealthUnhealthy)

	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
		t.Fatal(err)
	}
	pod.Finalizers = nil
	if err := env.Client.Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	// With no kubelet here, finish the graceful deletion the way a kubelet does once the
	// containers have stopped: delete again with a zero grace period.
	if err := env.Client.Delete(ctx, pod, client.GracePeriodSeconds(0)); client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "MeshEndpoint removed with its pod", func() error {
		if _, err := getEndpoint(ctx, ns, "leaving"); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%v)", err)
		}
		return nil
	})
}

// TestRestart: an agent restarted on a converged node rewrites nothing, and removes the
// MeshEndpoint of a pod deleted while it was down.
func TestRestart(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t, ctx)
	node := "node-" + ns // its own node, so the test can run again in the same API server
	if _, err := createNode(node)(env); err != nil {
		t.Fatal(err)
	}
	// Each agent's controller has a name of its own, so the restarted one's reconciles are its own.
	stop, err := startNamedAgent(node, "agent-"+ns+"-1")(env)
	if err != nil {
		t.Fatal(err)
	}
	probes := map[string]func() int64{}
	for _, name := range []string{"stays-0", "stays-1", "goes"} {
		ip := newPodIP()
		port, count, _ := listenTCPCounting(t, ip)
		probes[name] = count
		createPod(t, ctx, ns, name, node, ip, true, map[string]string{portspec.AnnotationProtocol: "tcp", portspec.AnnotationPort: strconv.Itoa(port)})
		healthIs(t, ns, name, meshv1alpha1.HealthHealthy)
		// The MeshService controller, which keeps running, writes its verdict on the same
		// status: settled before the versions are taken, so a later write is the agent's.
		verdictIs(t, ns, name, metav1.ConditionTrue)
	}
	stop()

	versions := map[string]string{}
	for _, name := range []string{"stays-0", "stays-1"} {
		ep, err := getEndpoint(ctx, ns, name)
		if err != nil {
			t.Fatal(err)
		}
		versions[name] = ep.ResourceVersion
	}
	if err := env.Client.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "goes"}}, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}

	restarted := "agent-" + ns + "-2"
	stop, err = startNamedAgent(node, restarted)(env)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	// The control: the restart does write what changed while it was down.
	testenv.Eventually(t, "the vanished pod's MeshEndpoint removed", func() error {
		if _, err := getEndpoint(ctx, ns, "goes"); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%v)", err)
		}
		return nil
	})
	// Several whole probe rounds of the new agent (its third probe of a pod starts a round after
	// two that finished), and every startup reconcile (one per pod at least) done.
	for _, name := range []string{"stays-0", "stays-1"} {
		probeRounds(t, probes[name], 3)
	}
	testenv.Settle(t, restarted, 3)
	for name, rv := range versions {
		ep, err := getEndpoint(ctx, ns, name)
		if err != nil {
			t.Fatal(err)
		}
		if ep.ResourceVersion != rv {
			t.Errorf("restart rewrote %s: resourceVersion %s → %s", name, rv, ep.ResourceVersion)
		}
	}
}

// listenTCPCounting is listenTCP that also counts the connections it accepted: the agent's
// probes of a TCP primary.
func listenTCPCounting(t *testing.T, ip string) (port int, accepted func() int64, stop func()) {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			_ = c.Close()
		}
	}()
	stop = func() { _ = l.Close() }
	t.Cleanup(stop)
	return l.Addr().(*net.TCPAddr).Port, n.Load, stop
}

// probeRounds waits until probes has counted rounds more probes than when it was called.
func probeRounds(t *testing.T, probes func() int64, rounds int64) {
	t.Helper()
	from := probes()
	testenv.Eventually(t, fmt.Sprintf("%d more probes", rounds), func() error {
		if n := probes() - from; n < rounds {
			return fmt.Errorf("%d so far", n)
		}
		return nil
	})
}
