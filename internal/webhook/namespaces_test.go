// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package webhook

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aether-mesh/aether-operator/internal/portspec"
	"github.com/aether-mesh/aether-operator/internal/registration"
)

// handlerIgnoredNamespace is ignored by the validator's flag but not by config/webhook's
// namespaceSelector, to show the handler's own rule (the two lists can disagree after an edit).
const handlerIgnoredNamespace = "ignored-by-flag"

var handlerIgnored = registration.IgnoredNamespaces{handlerIgnoredNamespace: true}

// TestIgnoredNamespacesAreNeverJudged: a managed pod whose annotations do not parse is admitted
// in a namespace the mesh never takes, without the webhook being called (config/webhook's
// namespaceSelector) or, where only the validator's --ignored-namespaces names it, unjudged; the
// same pod elsewhere is denied (the positive control).
func TestIgnoredNamespacesAreNeverJudged(t *testing.T) {
	ctx := testContext(t)
	broken := map[string]string{portspec.AnnotationPorts: "8080,9000=tpc"}

	if err := env.Client.Create(ctx, pod(namespace(t, ctx), true, broken)); err == nil {
		t.Fatal("control: a broken managed pod was admitted in an ordinary namespace")
	}

	for _, ns := range []string{"kube-system", "kube-public", "kube-node-lease"} {
		before := webhookCalls(t)
		if err := env.Client.Create(ctx, pod(ns, true, broken)); err != nil {
			t.Errorf("a managed pod in %s was judged: %v", ns, err)
		}
		if calls := webhookCalls(t) - before; calls != 0 {
			t.Errorf("the webhook was called %v times for a pod in %s (namespaceSelector)", calls, ns)
		}
	}

	// The namespace is fixed (the validator's flag names it): the test may run again in it.
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: handlerIgnoredNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	before := webhookCalls(t)
	if err := env.Client.Create(ctx, pod(handlerIgnoredNamespace, true, broken)); err != nil {
		t.Errorf("a managed pod in %s (ignored by the flag) was judged: %v", handlerIgnoredNamespace, err)
	}
	if webhookCalls(t) == before {
		t.Errorf("control: the webhook was not called for %s, which only the flag ignores", handlerIgnoredNamespace)
	}
}
