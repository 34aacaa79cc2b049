// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package webhook

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
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
		// Every pod runs as its service's ServiceAccount, so that labelling one managed is judged
		// on its annotations ("default" is denied: TestDefaultServiceAccountDenied).
		Spec: corev1.PodSpec{ServiceAccountName: "app", Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}}},
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
		"unknown protocol":   {portspec.AnnotationProtocol: "sctp"},
		"tcp and udp on 53":  {portspec.AnnotationPorts: "8080,53=tcp,53=udp"},
		"udp on a socket":    {portspec.AnnotationPorts: "8080,5353=udp", portspec.AnnotationUDSSocket: "sock/app.sock"},
		"http3":              {portspec.AnnotationPorts: "8080,8443=h3"},
		"bad weight":         {portspec.AnnotationWeight: "0"},
		"bad health path":    {portspec.AnnotationHealthPath: "healthz"},
		"bad health mode":    {portspec.AnnotationHealthCheckMode: "passive"},
		"reserved metadata":  {portspec.AnnotationMetadataPrefix + "pod": "x"},
		"bad upstream":       {portspec.AnnotationUpstreams: "Payments"},
		"unknown annotation": {"endpoint.aether.io/prots": "8080"},
		"several at once":    {portspec.AnnotationPort: "18081", portspec.AnnotationPorts: "9000=sctp"},
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
		{portspec.AnnotationPort: "8080", portspec.AnnotationPorts: "8080,5353=udp"},
		{portspec.AnnotationProtocol: "udp", portspec.AnnotationPort: "53"},
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

// TestUpdates: editing a managed pod's annotations into an invalid state is denied. A pod that
// slipped past the webhook (created during an outage) still accepts every update that leaves
// the mesh's keys alone — labels, a finalizer, an unrelated annotation such as the one `kubectl
// rollout restart` writes — while a change to any key of the grammar is judged, as is turning
// the label to "true".
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

	broken := map[string]string{portspec.AnnotationPorts: "8080,9000=tpc"}
	var slipped *corev1.Pod
	whileWebhookDown(t, ctx, ns, func() {
		slipped = pod(ns, true, maps.Clone(broken))
		if err := env.Client.Create(ctx, slipped); err != nil {
			t.Fatalf("creating a broken managed pod while the webhook is down: %v", err)
		}
	})

	t.Run("unrelated changes are admitted", func(t *testing.T) {
		update(t, ctx, slipped, "a labels-only update", func(p *corev1.Pod) { p.Labels["team"] = "a" }, "")
		update(t, ctx, slipped, "adding a finalizer", func(p *corev1.Pod) { p.Finalizers = []string{"example.com/cleanup"} }, "")
		update(t, ctx, slipped, "an unrelated annotation", func(p *corev1.Pod) { p.Annotations["example.com/owner"] = "team-a" }, "")
		update(t, ctx, slipped, "a key that is not the grammar's", func(p *corev1.Pod) { p.Annotations["config.aether.io/other"] = "x" }, "")
		// What a user runs: kubectl annotate, as `kubectl rollout restart` does for a pod template.
		out, stderr, err := env.Kubectl(ctx, "annotate", "-n", ns, "pod", slipped.Name, "kubectl.kubernetes.io/restartedAt=2026-11-30T00:00:00Z")
		if err != nil {
			t.Errorf("kubectl annotate of an unrelated annotation on a pod with broken mesh annotations: %v\n%s%s", err, out, stderr)
		}
	})

	t.Run("a change to a key of the grammar is judged", func(t *testing.T) {
		const stillBroken = `endpoint.aether.io/ports: "8080,9000=tpc": unknown protocol suffix "tpc"`
		for what, tt := range map[string]struct {
			change func(*corev1.Pod)
			deny   string
		}{
			"weight":                  {func(p *corev1.Pod) { p.Annotations[portspec.AnnotationWeight] = "5" }, stillBroken},
			"a metadata key":          {func(p *corev1.Pod) { p.Annotations[portspec.AnnotationMetadataPrefix+"zone"] = "a" }, stillBroken},
			"upstreams":               {func(p *corev1.Pod) { p.Annotations[portspec.AnnotationUpstreams] = "payments" }, stillBroken},
			"an unknown endpoint key": {func(p *corev1.Pod) { p.Annotations["endpoint.aether.io/prots"] = "8080" }, stillBroken},
			"another broken ports":    {func(p *corev1.Pod) { p.Annotations[portspec.AnnotationPorts] = "8080,9000=tcpp" }, `"tcpp"`},
			"removing the ports": {func(p *corev1.Pod) {
				delete(p.Annotations, portspec.AnnotationPorts)
				p.Annotations[portspec.AnnotationPort] = "x"
			}, `"x" is not a port number`},
		} {
			update(t, ctx, slipped, what, tt.change, tt.deny)
		}
		update(t, ctx, slipped, "fixing the ports", func(p *corev1.Pod) { p.Annotations[portspec.AnnotationPorts] = "8080,9000=tcp" }, "")
	})

	t.Run("turning the label to true is judged", func(t *testing.T) {
		unmanaged := pod(ns, false, maps.Clone(broken))
		if err := env.Client.Create(ctx, unmanaged); err != nil {
			t.Fatal(err)
		}
		update(t, ctx, unmanaged, `labelling "true"`, func(p *corev1.Pod) { p.Labels = map[string]string{portspec.LabelManaged: "true"} },
			`unknown protocol suffix "tpc"`)
		update(t, ctx, unmanaged, `labelling "True"`, func(p *corev1.Pod) { p.Labels = map[string]string{portspec.LabelManaged: "True"} }, "")
		update(t, ctx, unmanaged, `then "true"`, func(p *corev1.Pod) { p.Labels[portspec.LabelManaged] = "true" }, `unknown protocol suffix "tpc"`)
	})
}

// update applies change to a fresh copy of p and expects a denial containing deny, or success
// when deny is empty.
func update(t *testing.T, ctx context.Context, p *corev1.Pod, what string, change func(*corev1.Pod), deny string) {
	t.Helper()
	fresh := &corev1.Pod{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(p), fresh); err != nil {
		t.Fatal(err)
	}
	if fresh.Labels == nil {
		fresh.Labels = map[string]string{}
	}
	if fresh.Annotations == nil {
		fresh.Annotations = map[string]string{}
	}
	change(fresh)
	err := env.Client.Update(ctx, fresh)
	switch {
	case deny == "" && err != nil:
		t.Errorf("%s: refused: %v", what, err)
	case deny != "" && (err == nil || !strings.Contains(err.Error(), denied) || !strings.Contains(err.Error(), deny)):
		t.Errorf("%s: got %v, want a denial containing %q", what, err, deny)
	}
}

// whileWebhookDown runs fn while the API server cannot reach the pod validator, as during a
// manager outage: the configuration's URL points at a closed loopback port, so failurePolicy
// Ignore admits what fn creates unjudged. Then it restores the configuration and waits until
// the validator judges again.
func whileWebhookDown(t *testing.T, ctx context.Context, ns string, fn func()) {
	t.Helper()
	original := setWebhookURL(t, ctx, "https://127.0.0.1:1"+PodPath)
	probe := func() error {
		return env.Client.Create(ctx, pod(ns, true, map[string]string{portspec.AnnotationPorts: "8080,,"}))
	}
	defer func() {
		setWebhookURL(t, ctx, original)
		testenv.Eventually(t, "the validator judges pods again", func() error {
			if err := probe(); err == nil || !strings.Contains(err.Error(), denied) {
				return fmt.Errorf("a broken managed pod: %v, want a denial", err)
			}
			return nil
		})
	}()
	testenv.Eventually(t, "the API server admits pods unjudged", func() error {
		if err := probe(); err != nil {
			return fmt.Errorf("a broken managed pod is still judged: %w", err)
		}
		return nil
	})
	fn()
}

// setWebhookURL points the pod validator's configuration at url and returns the URL it had.
func setWebhookURL(t *testing.T, ctx context.Context, url string) string {
	t.Helper()
	var was string
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: "validating-webhook-configuration"}, cfg); err != nil {
			return err
		}
		i := slices.IndexFunc(cfg.Webhooks, func(w admissionregistrationv1.ValidatingWebhook) bool { return w.Name == "vpod.mesh.aether.io" })
		if i < 0 || cfg.Webhooks[i].ClientConfig.URL == nil {
			return fmt.Errorf("want the pod validator, with a URL (envtest's), got %+v", cfg.Webhooks)
		}
		was = *cfg.Webhooks[i].ClientConfig.URL
		cfg.Webhooks[i].ClientConfig.URL = &url
		return env.Client.Update(ctx, cfg)
	})
	if err != nil {
		t.Fatal(err)
	}
	return was
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
  serviceAccountName: payments
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

// TestDefaultServiceAccountDenied: a managed pod running as the `default` ServiceAccount, named
// or unset, is denied with registration.DefaultServiceAccountError's text, word for word, on
// CREATE and when the label turns "true"; the same pod unmanaged, and a managed one with its own
// ServiceAccount, are admitted (the controls).
func TestDefaultServiceAccountDenied(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t, ctx)
	want := func(name string, named bool) string {
		how := `names no ServiceAccount, so it runs as "default"`
		if named {
			how = `runs as ServiceAccount "default"`
		}
		return denied + "pod " + ns + "/" + name + ` is managed (label aether.io/managed="true") but ` + how +
			`, and a meshed pod's ServiceAccount is its service's name: it would join a service called "default" with every ` +
			`other workload that names none. Create a ServiceAccount named after the service (kubectl create serviceaccount ` +
			`<service>) and set spec.serviceAccountName: <service> in the pod template, or remove the label aether.io/managed`
	}
	for _, sa := range []string{"", "default"} {
		p := pod(ns, true, map[string]string{portspec.AnnotationPorts: "8080"})
		p.Spec.ServiceAccountName = sa
		err := env.Client.Create(ctx, p)
		if err == nil {
			t.Fatalf("a managed pod with serviceAccountName %q was admitted", sa)
		}
		if got := err.Error(); !strings.HasSuffix(got, want(p.Name, sa != "")) {
			t.Errorf("serviceAccountName %q: denial\n%s\nwant it to end with\n%s", sa, got, want(p.Name, sa != ""))
		}
	}

	plain := pod(ns, false, map[string]string{portspec.AnnotationPorts: "8080"})
	plain.Spec.ServiceAccountName = ""
	if err := env.Client.Create(ctx, plain); err != nil {
		t.Fatalf("control: an unmanaged pod running as default was refused: %v", err)
	}
	if err := env.Client.Create(ctx, pod(ns, true, map[string]string{portspec.AnnotationPorts: "8080"})); err != nil {
		t.Fatalf("control: a managed pod with its own ServiceAccount was refused: %v", err)
	}
	update(t, ctx, plain, `labelling "true"`, func(p *corev1.Pod) { p.Labels = map[string]string{portspec.LabelManaged: "true"} },
		want(plain.Name, false))
}

// TestEveryProblemInOneDenial: a managed pod on the `default` ServiceAccount that also declares a
// reserved port and a misspelt protocol is told all three in one denial, each with its fix, one
// per line: the ServiceAccount's, then the annotations' errors as the parser gives them. (Told
// only of the ServiceAccount before, the user fixed it, applied again and only then learnt of
// the port.)
func TestEveryProblemInOneDenial(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t, ctx)
	p := pod(ns, true, map[string]string{portspec.AnnotationPorts: "8080=tpc,18082"})
	p.Spec.ServiceAccountName = ""
	err := env.Client.Create(ctx, p)
	if err == nil {
		t.Fatal("a managed pod on the default ServiceAccount with a reserved port was admitted")
	}
	for _, want := range []string{
		`names no ServiceAccount, so it runs as "default"`,
		`unknown protocol suffix "tpc" on port 8080`,
		`port 18082 is reserved`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("denial\n%s\nsays nothing of %q", err, want)
		}
	}
}
