// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package certrotation

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
)

// TestRoleReachesOnlyTheCertSecret: as a user granted what config/rbac grants the manager
// (asManager: manager-role and webhook-cert-role, read from their manifests), in a namespace
// holding the certificate's Secret (made from its manifest, as the install makes it) and another
// Secret, the manager may get and update its Secret, and list and watch it with the field selector
// metadata.name=<its name> (what the narrowed caches send; the API server authorizes such a list
// or watch as one of that name); it may not read, list, watch, update or create any other Secret,
// nor list the namespace's Secrets. Each refusal is the API server's Forbidden.
func TestRoleReachesOnlyTheCertSecret(t *testing.T) {
	ctx := t.Context()
	ns := namespace(t, "certrot-rbac")
	mine := installSecret(t, ns)
	other := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "someone-elses"}, StringData: map[string]string{"password": "hunter2"}}
	if err := env.Client.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	cs := kubernetes.NewForConfigOrDie(asManager(t, ns))
	secrets := cs.CoreV1().Secrets(ns)
	byName := func(name string) metav1.ListOptions {
		return metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()}
	}
	watch := func(ctx context.Context, o metav1.ListOptions) error {
		w, err := secrets.Watch(ctx, o)
		if err == nil {
			w.Stop()
		}
		return err
	}
	list := func(ctx context.Context, o metav1.ListOptions) error {
		_, err := secrets.List(ctx, o)
		return err
	}

	allowed := map[string]func() error{
		"get its Secret": func() error { _, err := secrets.Get(ctx, mine, metav1.GetOptions{}); return err },
		"update its Secret": func() error {
			s, err := secrets.Get(ctx, mine, metav1.GetOptions{})
			if err != nil {
				return err
			}
			s.Data = map[string][]byte{"tls.crt": []byte("x")}
			_, err = secrets.Update(ctx, s, metav1.UpdateOptions{})
			return err
		},
		"list its Secret by name":  func() error { return list(ctx, byName(mine)) },
		"watch its Secret by name": func() error { return watch(ctx, byName(mine)) },
	}
	for what, call := range allowed {
		if err := call(); err != nil {
			t.Errorf("%s: %v; want it allowed", what, err)
		}
	}

	forbidden := map[string]func() error{
		"get another Secret": func() error { _, err := secrets.Get(ctx, other.Name, metav1.GetOptions{}); return err },
		"update another Secret": func() error {
			s := other.DeepCopy()
			s.StringData = map[string]string{"password": "mine now"}
			_, err := secrets.Update(ctx, s, metav1.UpdateOptions{})
			return err
		},
		"list another Secret by name":   func() error { return list(ctx, byName(other.Name)) },
		"watch another Secret by name":  func() error { return watch(ctx, byName(other.Name)) },
		"list the namespace's Secrets":  func() error { return list(ctx, metav1.ListOptions{}) },
		"watch the namespace's Secrets": func() error { return watch(ctx, metav1.ListOptions{}) },
		"create a Secret": func() error {
			_, err := secrets.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "planted"}}, metav1.CreateOptions{})
			return err
		},
		"delete its Secret":               func() error { return secrets.Delete(ctx, mine, metav1.DeleteOptions{}) },
		"list with a selector of another": func() error { return list(ctx, metav1.ListOptions{FieldSelector: "metadata.name!=" + mine}) },
	}
	for what, call := range forbidden {
		if err := call(); !apierrors.IsForbidden(err) {
			t.Errorf("%s: %v; want Forbidden", what, err)
		}
	}
}
