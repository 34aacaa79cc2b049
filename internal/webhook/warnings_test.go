// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package webhook

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aether-mesh/aether-operator/internal/portspec"
)

// warningsSeen records the warnings the API server returns to one client (admission warnings
// arrive as Warning headers, code 299).
type warningsSeen struct {
	mu    sync.Mutex
	texts []string
}

func (w *warningsSeen) HandleWarningHeaderWithContext(_ context.Context, code int, _, text string) {
	if code != 299 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.texts = append(w.texts, text)
}

// take returns the warnings seen since the last take.
func (w *warningsSeen) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	texts := w.texts
	w.texts = nil
	return texts
}

// warningClient is an admin client whose warnings are recorded, not logged.
func warningClient(t *testing.T) (client.Client, *warningsSeen) {
	t.Helper()
	cfg := rest.CopyConfig(env.Config)
	seen := &warningsSeen{}
	cfg.WarningHandler, cfg.WarningHandlerWithContext = nil, seen
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c, seen
}

// labelled is a pod labelled aether.io/managed with value.
func labelled(ns, value string, annotations map[string]string) *corev1.Pod {
	p := pod(ns, false, annotations)
	p.Labels = map[string]string{portspec.LabelManaged: value}
	return p
}

func notInTheMesh(value string) string {
	return fmt.Sprintf(`label aether.io/managed is %q, not "true": this pod is NOT in the mesh and its mesh annotations are not checked; `+
		`write aether.io/managed: "true" to put it in the mesh (only that exact value does), or remove the label`, value)
}

// TestManagedLabelOtherThanTrueWarns: a pod labelled aether.io/managed with any value but "true"
// is not in the mesh; it is admitted (its annotations, even broken, are not judged) with a
// warning that says so and names the value to write. "true" is judged; no label never reaches
// the webhook.
func TestManagedLabelOtherThanTrueWarns(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t, ctx)
	c, seen := warningClient(t)
	broken := map[string]string{portspec.AnnotationPorts: "8080,9000=tpc"}
	for _, value := range []string{"True", "TRUE", "yes", "1", "on", "false", "", "enabled"} {
		t.Run(fmt.Sprintf("%q", value), func(t *testing.T) {
			before := webhookCalls(t)
			if err := c.Create(ctx, labelled(ns, value, broken)); err != nil {
				t.Fatalf("a pod labelled %q (not in the mesh) refused: %v", value, err)
			}
			if got, want := seen.take(), []string{notInTheMesh(value)}; !slices.Equal(got, want) {
				t.Errorf("warnings %q, want %q", got, want)
			}
			if webhookCalls(t) == before {
				t.Errorf("the webhook was not called for a pod labelled %q", value)
			}
		})
	}
	t.Run(`"true" is judged`, func(t *testing.T) {
		err := c.Create(ctx, labelled(ns, "true", broken))
		if err == nil || !strings.Contains(err.Error(), denied+`endpoint.aether.io/ports: "8080,9000=tpc"`) {
			t.Errorf("got %v, want the parser's denial", err)
		}
		if got := seen.take(); len(got) != 0 {
			t.Errorf("warnings %q for a managed pod with no misspelt key", got)
		}
	})
	t.Run("a relabel warns once, when the value changes", func(t *testing.T) {
		p := labelled(ns, "True", broken)
		if err := c.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		seen.take()
		p.Annotations["example.com/note"] = "x"
		if err := c.Update(ctx, p); err != nil {
			t.Fatal(err)
		}
		if got := seen.take(); len(got) != 0 {
			t.Errorf("an update keeping the value %q warned again: %q", "True", got)
		}
		p.Labels[portspec.LabelManaged] = "yes"
		if err := c.Update(ctx, p); err != nil {
			t.Fatal(err)
		}
		if got, want := seen.take(), []string{notInTheMesh("yes")}; !slices.Equal(got, want) {
			t.Errorf("relabelling to %q: warnings %q, want %q", "yes", got, want)
		}
	})

	// What a user sees at kubectl create.
	manifest := filepath.Join(t.TempDir(), "pod.yaml")
	if err := os.WriteFile(manifest, []byte(`apiVersion: v1
kind: Pod
metadata: {name: payments, namespace: `+ns+`, labels: {aether.io/managed: "True"}}
spec:
  containers: [{name: app, image: registry.example/payments:1}]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	out, stderr, err := env.Kubectl(ctx, "create", "-f", manifest)
	if err != nil {
		t.Fatalf("kubectl create: %v\n%s%s", err, out, stderr)
	}
	if want := "Warning: " + notInTheMesh("True"); !strings.Contains(stderr, want) {
		t.Errorf("kubectl's stderr lacks %q:\n%s", want, stderr)
	}
}

// TestMisspeltKeysWarn: annotation keys a couple of edits from the grammar's (a wrong prefix,
// which Parse ignores) are admitted with a warning naming the key meant; warnings never deny,
// and accompany a denial.
func TestMisspeltKeysWarn(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t, ctx)
	c, seen := warningClient(t)
	warn := func(key, meant string) string {
		return fmt.Sprintf("annotation %q is not a mesh annotation and is ignored; did you mean %q?", key, meant)
	}
	for key, meant := range map[string]string{
		"endpoints.aether.io/ports":      portspec.AnnotationPorts,
		"endpoint.aether.i/ports":        portspec.AnnotationPorts,
		"endpoints.aether.io/port":       portspec.AnnotationPort,
		"config.aether.io/upstream":      portspec.AnnotationUpstreams,
		"metadata.endpoints.aether.io/x": portspec.AnnotationMetadataPrefix + "x",
	} {
		t.Run(key, func(t *testing.T) {
			err := c.Create(ctx, pod(ns, true, map[string]string{key: "9000=tcp", portspec.AnnotationPort: "8080"}))
			if err != nil {
				t.Errorf("a warning denied the pod: %v", err)
			}
			if got, want := seen.take(), []string{warn(key, meant)}; !slices.Equal(got, want) {
				t.Errorf("warnings %q, want %q", got, want)
			}
		})
	}
	t.Run("with a denial", func(t *testing.T) {
		err := c.Create(ctx, pod(ns, true, map[string]string{"endpoints.aether.io/ports": "9000=tcp", portspec.AnnotationPort: "18081"}))
		if err == nil || !strings.Contains(err.Error(), "port 18081 is reserved") {
			t.Errorf("got %v, want the reserved-port denial", err)
		}
		if got, want := seen.take(), []string{warn("endpoints.aether.io/ports", portspec.AnnotationPorts)}; !slices.Equal(got, want) {
			t.Errorf("warnings %q, want %q", got, want)
		}
	})
	t.Run("on an update that adds one", func(t *testing.T) {
		p := pod(ns, true, map[string]string{portspec.AnnotationPorts: "8080"})
		if err := c.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		seen.take()
		p.Annotations["config.aether.io/upstream"] = "payments"
		if err := c.Update(ctx, p); err != nil {
			t.Fatalf("a warning denied the update: %v", err)
		}
		if got, want := seen.take(), []string{warn("config.aether.io/upstream", portspec.AnnotationUpstreams)}; !slices.Equal(got, want) {
			t.Errorf("warnings %q, want %q", got, want)
		}
	})
	t.Run("many: bounded", func(t *testing.T) {
		annotations := map[string]string{}
		for i := range 12 {
			annotations[fmt.Sprintf("endpoints.aether.io/p%02d", i)] = "x"
		}
		if err := c.Create(ctx, pod(ns, true, annotations)); err != nil {
			t.Fatal(err)
		}
		got := seen.take()
		if len(got) != portspec.MaxWarnings || !strings.HasPrefix(got[len(got)-1], "and 8 more annotations") {
			t.Errorf("12 misspelt keys: warnings %q, want %d, the last counting 8 more", got, portspec.MaxWarnings)
		}
	})
}
