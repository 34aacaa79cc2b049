// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	configv1 "github.com/aether-mesh/aether-operator/api/config/v1"
	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/portspec"
	"github.com/aether-mesh/aether-operator/internal/registration"
	"github.com/aether-mesh/aether-operator/internal/testenv"
	"github.com/aether-mesh/aether-operator/internal/testlog"
)

// udsFailures reads aether_agent_uds_resolve_failures_total{reason}.
func udsFailures(t *testing.T, reason registration.UDSReason) float64 {
	t.Helper()
	n, err := testenv.Counter("aether_agent_uds_resolve_failures_total", "reason", string(reason))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// createUDSPod creates a running managed pod of ServiceAccount payments on node, labelled app,
// annotated, with volumes and fsGroup 65532.
func createUDSPod(t *testing.T, ctx context.Context, ns, name, node, app string, annotations map[string]string, volumes ...corev1.Volume) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: annotations,
			Labels: map[string]string{LabelManaged: "true", "app": app}},
		Spec: corev1.PodSpec{NodeName: node, ServiceAccountName: "payments", Volumes: volumes,
			SecurityContext: &corev1.PodSecurityContext{FSGroup: new(int64(65532))},
			Containers:      []corev1.Container{{Name: "app", Image: "registry.example/app:1"}}},
	}
	return createRunning(t, ctx, pod, newPodIP())
}

func csiUDS(name string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: registration.UDSDriver}}}
}

// TestUDSDelivery: the model's pods carry their socket's node path when they serve on one —
// from their own annotation, which wins, or from the winning EndpointPolicy of a Service that
// selects them — and a declaration the agent cannot serve leaves the pod on TCP, counted once per
// pod and reason, with one log line naming the pod. With delivery off, no policy applies and an
// annotated pod is counted as disabled.
func TestUDSDelivery(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t, ctx)
	a := startXDSAgent(t, ns)
	socket := map[string]string{portspec.AnnotationUDSSocket: "uds/app.sock"}
	annotated := createUDSPod(t, ctx, ns, "annotated", a.node, "other", socket, csiUDS("uds"))
	both := createUDSPod(t, ctx, ns, "both", a.node, "echo", socket, csiUDS("uds"))
	policied := createUDSPod(t, ctx, ns, "policied", a.node, "echo", nil, csiUDS("uds"))
	createUDSPod(t, ctx, ns, "emptydir", a.node, "other", socket, corev1.Volume{Name: "uds",
		VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	createUDSPod(t, ctx, ns, "undeclared", a.node, "ledger", nil, csiUDS("uds"))
	for _, o := range []*corev1.Service{
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "echo"}, Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "echo"},
			Ports: []corev1.ServicePort{{Port: 8080, TargetPort: intstr.FromInt(8080)}}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ledger"}, Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "ledger"},
			Ports: []corev1.ServicePort{{Port: 8080, TargetPort: intstr.FromInt(8080)}}}},
	} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	for name, p := range map[string]configv1.EndpointPolicySpec{
		"echo-a":  {TargetRef: configv1.TargetRef{Kind: configv1.KindService, Name: "echo"}, UDSSocket: "uds/policy.sock"},
		"echo-z":  {TargetRef: configv1.TargetRef{Kind: configv1.KindService, Name: "echo"}, UDSSocket: "uds/loser.sock"},
		"ledger":  {TargetRef: configv1.TargetRef{Kind: configv1.KindService, Name: "ledger"}, UDSSocket: "sock/app.sock"},
		"unknown": {TargetRef: configv1.TargetRef{Kind: configv1.KindService, Name: "nothing"}, UDSSocket: "uds/x.sock"},
	} {
		if err := env.Client.Create(ctx, &configv1.EndpointPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: p}); err != nil {
			t.Fatal(err)
		}
	}

	logs := &testlog.Lines{}
	p := newPublisher(a.mgr.GetCache(), a.mgr.GetClient(), logr.Discard(), a.options)
	p.uds = newUDSResolver(a.mgr.GetCache(), UDSOptions{Enabled: true}, logs.Logger(0))
	notCSI, undeclared := udsFailures(t, registration.UDSNotCSI), udsFailures(t, registration.UDSVolumeNotDeclared)
	root := portspec.UDSHostRoot + "/"
	want := map[string]string{
		"annotated":  root + string(annotated.UID) + "/app.sock",
		"both":       root + string(both.UID) + "/app.sock",        // the annotation wins
		"policied":   root + string(policied.UID) + "/policy.sock", // the smallest policy name wins
		"emptydir":   "",                                           // not_csi: TCP delivery
		"undeclared": "",                                           // volume_not_declared: TCP delivery
	}
	var pods []model.LocalPod
	testenv.Eventually(t, "the five pods in the model with their delivery", func() error {
		m, err := p.mesh(ctx)
		if err != nil {
			return err
		}
		pods = m.Pods
		got := map[string]string{}
		for _, lp := range m.Pods {
			got[lp.Name] = lp.UDSPath
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			return fmt.Errorf("deliveries %v, want %v", got, want)
		}
		return nil
	})
	if _, err := p.mesh(ctx); err != nil { // a second rebuild tells nothing new
		t.Fatal(err)
	}
	if d := udsFailures(t, registration.UDSNotCSI) - notCSI; d != 1 {
		t.Errorf("not_csi grew by %v, want 1 (once per pod, whatever the rebuilds)", d)
	}
	if d := udsFailures(t, registration.UDSVolumeNotDeclared) - undeclared; d != 1 {
		t.Errorf("volume_not_declared grew by %v, want 1", d)
	}
	for _, pod := range []string{"emptydir", "undeclared"} {
		if lines := logs.With("delivery refused", ns, pod); len(lines) != 1 {
			t.Errorf("%d log lines name pod %s/%s, want 1: %q", len(lines), ns, pod, logs.With(""))
		}
	}
	if lines := logs.With("EndpointPolicy ignored", "echo-z"); len(lines) != 1 {
		t.Errorf("%d log lines name the losing policy echo-z, want 1: %q", len(lines), logs.With(""))
	}
	if err := (model.Mesh{Pods: pods}).Pods[0].Validate(); err != nil {
		t.Error(err)
	}

	// Delivery off: no policy is read, and the annotated pods are counted as disabled.
	disabled := udsFailures(t, registration.UDSDisabled)
	p.uds = newUDSResolver(a.mgr.GetCache(), UDSOptions{Enabled: false}, logr.Discard())
	m, err := p.mesh(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, lp := range m.Pods {
		if lp.UDSPath != "" {
			t.Errorf("pod %s delivered to %s with delivery off", lp.Name, lp.UDSPath)
		}
	}
	if d := udsFailures(t, registration.UDSDisabled) - disabled; d != 3 {
		t.Errorf("disabled grew by %v, want 3 (annotated, both, emptydir)", d)
	}
}

// TestUDSReasonsExported: every reason is a series before the first refusal.
func TestUDSReasonsExported(t *testing.T) {
	for _, r := range registration.AllUDSReasons() {
		udsFailures(t, r) // fails the test when the series is missing
	}
}

// shortSocketDir is a temporary directory short enough for a Unix socket address (107 bytes):
// t.TempDir's paths, named after the test, can be longer.
func shortSocketDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "uds")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// TestProbeOverSocket: delegated liveness probes a pod that serves on a Unix socket there, not at
// its address (where nothing listens): HTTP, and TCP for a TCP primary; a socket nobody serves is
// unhealthy.
func TestProbeOverSocket(t *testing.T) {
	dir := shortSocketDir(t)
	path := filepath.Join(dir, "app.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		w.WriteHeader(http.StatusOK)
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })

	// 127.0.0.1:1: nothing listens there, so a probe that went to the address would fail.
	ep := func(proto meshv1alpha1.Protocol, healthPath string) *meshv1alpha1.MeshEndpoint {
		return &meshv1alpha1.MeshEndpoint{Spec: meshv1alpha1.MeshEndpointSpec{Address: "127.0.0.1", PrimaryPort: 1,
			Ports:       []meshv1alpha1.PortProtocol{{Port: 1, Protocol: proto}},
			HealthCheck: meshv1alpha1.HealthCheck{Path: healthPath}}}
	}
	ctx := context.Background()
	tests := map[string]struct {
		ep     *meshv1alpha1.MeshEndpoint
		socket string
		want   bool
	}{
		"http over the socket":   {ep(meshv1alpha1.ProtocolHTTP, "/healthz"), path, true},
		"http, wrong path":       {ep(meshv1alpha1.ProtocolHTTP, "/missing"), path, false},
		"tcp over the socket":    {ep(meshv1alpha1.ProtocolTCP, ""), path, true},
		"no socket: the address": {ep(meshv1alpha1.ProtocolHTTP, "/healthz"), "", false},
		"a socket nobody serves": {ep(meshv1alpha1.ProtocolTCP, ""), filepath.Join(dir, "none.sock"), false},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if got := probeEndpoint(ctx, tt.ep, time.Second, tt.socket); got != tt.want {
				t.Errorf("probeEndpoint = %v, want %v", got, tt.want)
			}
		})
	}
}
