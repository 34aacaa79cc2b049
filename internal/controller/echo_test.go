// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
)

// TestEchoes: an event is an echo only at a resourceVersion the reconciler wrote, of that kind and
// name, once; a reconcile's two writes of one object are both recognized; a delete forgets.
func TestEchoes(t *testing.T) {
	at := func(o interface {
		SetResourceVersion(string)
	}, rv string) {
		o.SetResourceVersion(rv)
	}
	meta := metav1.ObjectMeta{Namespace: "shop", Name: "ledger"}
	ms, svc := &meshv1alpha1.MeshService{ObjectMeta: meta}, &corev1.Service{ObjectMeta: meta}
	var e echoes

	at(ms, "10")
	e.wrote(ms) // created
	at(ms, "11")
	e.wrote(ms) // its status
	at(svc, "11")
	if e.isEcho(svc) {
		t.Errorf("a Service at a MeshService's written version is an echo")
	}
	at(ms, "12")
	if e.isEcho(ms) {
		t.Errorf("another writer's version 12 is an echo")
	}
	for _, rv := range []string{"10", "11"} {
		at(ms, rv)
		if !e.isEcho(ms) {
			t.Errorf("the write at %s is not an echo", rv)
		}
		if e.isEcho(ms) {
			t.Errorf("the write at %s is an echo twice", rv)
		}
	}
	if len(e.written) != 0 {
		t.Errorf("echoed writes are still remembered: %v", e.written)
	}

	for rv := range 10 { // only the last echoesKept writes of one object are kept
		at(ms, string(rune('a'+rv)))
		e.wrote(ms)
	}
	if got := len(e.written[keyOf(ms)]); got != echoesKept {
		t.Errorf("%d writes remembered, want %d", got, echoesKept)
	}
	e.forget(ms)
	if len(e.written) != 0 {
		t.Errorf("a deleted object's writes are still remembered")
	}

	var none *echoes
	none.wrote(ms) // a reconciler never set up records nothing, and does not panic
}
