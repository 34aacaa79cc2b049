// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package webhook

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aether-mesh/aether-operator/internal/portspec"
	"github.com/aether-mesh/aether-operator/internal/testenv"
)

const denied = `admission webhook "vpod.mesh.aether.io" denied the request: `

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func namespace(t *testing.T, ctx context.Context) string {
	t.Helper()
	ns, err := env.Namespace(ctx, "pods")
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

var podCount int

func pod(ns string, managed bool, annotations map[string]string) *corev1.Pod {
	podCount++
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("app-%d", podCount), Annotations: annotations},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}}},
	}
	if managed {
		p.Labels = map[string]string{"aether.io/managed": "true"}
	}
	return p
}

// webhookCalls is how many admission requests the pod validator has served, from
// controller-runtime's own metric.
func webhookCalls(t *testing.T) float64 {
	t.Helper()
	n, err := testenv.Counter("controller_runtime_webhook_requests_total", "webhook", PodPath)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestReservedPortsDenied: 18081 and 18082 in either annotation, with any suffix, are denied
// with the whole explanation.
func TestReservedPortsDenied(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t, ctx)
	explain := map[string]string{
		"18081": `port 18081 is reserved: it is the mesh's HTTP proxy port, where the Host header decides the destination; it is not a port of any service (serve the application on another port, for example 8080, and declare that one)`,
		"18082": `port 18082 is reserved: it is the mesh's TCP port, which reaches a service's default TCP port; it is not a port of any service (serve the application on another port, for example 8080, and declare that one)`,
	}
	for port, why := range explain {
		for _, suffix := range []string{"", "=h1", "=h2", "=http2", "=grpc", "=tcp"} {
			value := "8080," + port + suffix
			t.Run("ports "+value, func(t *testing.T) {
				err := env.Client.Create(ctx, pod(ns, true, map[string]string{portspec.AnnotationPorts: value}))
				want := denied + fmt.Sprintf(`endpoint.aether.io/ports: %q: `, value) + why
				if err == nil || !strings.HasSuffix(err.Error(), want) {
					t.Errorf("got %v\nwant an error ending %q", err, want)
				}
			})
		}
		t.Run("port "+port, func(t *testing.T) {
			err := env.Client.Create(ctx, pod(ns, true, map[string]string{portspec.AnnotationPort: port}))
			want := denied + fmt.Sprintf(`endpoint.aether.io/port: %q: `, port) + why
			if err == nil || !strings.HasSuffix(err.Error(), want) {
				t.Errorf("got %v\nwant an error ending %q", err, want)
			}
		})
	}
}

// TestGrammarErrorsDenied: each class of grammar error is denied with the parser's text, verbatim.
func TestGrammarErrorsDenied(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t, ctx)
	for name, annotations := range map[string]map[string]string{
		"unknown suffix":     {portspec.AnnotationPorts: "8080,9000=tpc"},
		"port out of range":  {portspec.AnnotationPorts: "8080,70000"},
		"not a port":         {portspec.AnnotationPort: "http"},
		"protocol conflict":  {portspec.AnnotationPorts: "9000=h2,9000=tcp"},
		"suffix on primary":  {portspec.AnnotationPort: "9000=tcp"},
		"empty element":      {portspec.AnnotationPorts: "8080,,9000"},
		"unknown protocol":   {portspec.AnnotationProtocol: "udp"},
		"bad weight":         {portspec.AnnotationWeight: "0"},
		"bad health path":    {portspec.AnnotationHealthPath: "healthz"},
		"bad health mode":    {portspec.AnnotationHealthCheckMode: "passive"},
		"reserved metadata":  {portspec.AnnotationMetadataPrefix + "pod": "x"},
		"bad upstream":       {portspec.AnnotationUpstreams: "Payments"},
		"unknown annotation": {"endpoint.aether.io/prots": "8080"},
		"several at once":    {portspec.AnnotationPort: "18081", portspec.AnnotationPorts: "9000=udp"},
	} {
		t.Run(name, func(t *testing.T) {
			_, parseErr := portspec.Parse(annotations)
			if parseErr == nil {
				t.Fatal("test case parses: it is no grammar error")
			}
			err := env.Client.Create(ctx, pod(ns, true, annotations))
			if err == nil || !strings.HasSuffix(err.Error(), denied+parseErr.Error()) {
				t.Errorf("got %v\nwant the parser's words: %s", err, parseErr)
			}
		})
	}
}

// TestValidAndUnmanagedPodsAdmitted: valid managed pods are admitted; an unmanaged pod with
// garbage annotations is admitted without the webhook being called at all (objectSelector).
func TestValidAndUnmanagedPodsAdmitted(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t, ctx)
	for _, annotations := range []map[string]string{
		nil,
		{portspec.AnnotationPort: "8080", portspec.AnnotationPorts: "8080,9090=h2,9000=tcp"},
		{portspec.AnnotationProtocol: "tcp", portspec.AnnotationPort: "5432"},
	} {
		before := webhookCalls(t)
		if err := env.Client.Create(ctx, pod(ns, true, annotations)); err != nil {
			t.Errorf("valid pod %v refused: %v", annotations, err)
		}
		if webhookCalls(t) == before {
			t.Errorf("control: the webhook was not called for a managed pod")
		}
	}
	before := webhookCalls(t)
	if err := env.Client.Create(ctx, pod(ns, false, map[string]string{portspec.AnnotationPorts: "18081=garbage,,"})); err != nil {
		t.Errorf("unmanaged pod refused: %v", err)
	}
	if calls := webhookCalls(t) - before; calls != 0 {
		t.Errorf("the webhook was called %v times for an unmanaged pod", calls)
	}
}

// TestUpdates: editing a managed pod's annotations into an invalid state is denied; an update
// that leaves the annotations alone is admitted even when they are invalid (a pod admitted while
// the webhook was down must still accept its controllers' updates).
func TestUpdates(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t, ctx)
	good := pod(ns, true, map[string]string{portspec.AnnotationPorts: "8080"})
	if err := env.Client.Create(ctx, good); err != nil {
		t.Fatal(err)
	}
	good.Annotations[portspec.AnnotationPorts] = "8080,9000=tpc"
	if err := env.Client.Update(ctx, good); err == nil || !strings.Contains(err.Error(), denied) {
		t.Errorf("editing annotations into an invalid state: got %v, want a denial", err)
	}

	slipped := pod(ns, false, map[string]string{portspec.AnnotationPorts: "8080,9000=tpc"})
	if err := env.Client.Create(ctx, slipped); err != nil {
		t.Fatal(err)
	}
	slipped.Labels = map[string]string{"aether.io/managed": "true", "team": "a"}
	if err := env.Client.Update(ctx, slipped); err != nil {
		t.Errorf("a labels-only update of a pod with invalid annotations was refused: %v", err)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(slipped), slipped); err != nil {
		t.Fatal(err)
	}
	slipped.Finalizers = []string{"example.com/cleanup"}
	if err := env.Client.Update(ctx, slipped); err != nil {
		t.Errorf("adding a finalizer to a managed pod with invalid annotations was refused: %v", err)
	}
}

// TestKubectlApplyPrintsTheDenial: what a user sees at `kubectl apply -f`.
func TestKubectlApplyPrintsTheDenial(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t, ctx)
	manifest := filepath.Join(t.TempDir(), "pod.yaml")
	if err := os.WriteFile(manifest, []byte(`apiVersion: v1
kind: Pod
metadata:
  name: payments
  namespace: `+ns+`
  labels: {aether.io/managed: "true"}
  annotations:
    endpoint.aether.io/ports: "8080,18082=tcp"
spec:
  containers: [{name: app, image: registry.example/payments:1}]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	out, stderr, err := env.Kubectl(ctx, "apply", "-f", manifest)
	if err == nil {
		t.Fatalf("kubectl apply of a pod declaring 18082 succeeded:\n%s", out)
	}
	for _, want := range []string{
		`admission webhook "vpod.mesh.aether.io" denied the request`,
		`endpoint.aether.io/ports: "8080,18082=tcp": port 18082 is reserved: it is the mesh's TCP port, which reaches a service's default TCP port; it is not a port of any service`,
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("kubectl's stderr lacks %q:\n%s", want, stderr)
		}
	}
}
