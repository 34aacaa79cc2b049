// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/aether-mesh/aether-operator/internal/portspec"
)

// TestPodSpecs: a pod's parsed annotations are reused while its resourceVersion stands (the
// annotations changed under the same version show it: the answer is the remembered one), parsed
// again at a new version, kept with their error, and forgotten when the pod is no longer the
// node's; a pod with no resourceVersion, and a nil memo, parse each time.
func TestPodSpecs(t *testing.T) {
	pod := func(uid types.UID, version, upstreams string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: uid, ResourceVersion: version,
			Annotations: map[string]string{portspec.AnnotationPort: "8080", portspec.AnnotationUpstreams: upstreams}}}
	}
	upstreams := func(s *podSpecs, p *corev1.Pod) []string {
		t.Helper()
		spec, err := s.parse(p)
		if err != nil {
			t.Fatalf("parse: %v", err)
		}
		return spec.Upstreams
	}
	s := newPodSpecs()
	if got := upstreams(s, pod("a", "1", "ledger")); !slices.Equal(got, []string{"ledger"}) {
		t.Fatalf("first parse: upstreams %v, want [ledger]", got)
	}
	if got := upstreams(s, pod("a", "1", "audit")); !slices.Equal(got, []string{"ledger"}) {
		t.Errorf("same resourceVersion: upstreams %v, want the remembered [ledger]", got)
	}
	if got := upstreams(s, pod("a", "2", "audit")); !slices.Equal(got, []string{"audit"}) {
		t.Errorf("new resourceVersion: upstreams %v, want [audit]", got)
	}
	if got := upstreams(s, pod("c", "", "ledger")); !slices.Equal(got, []string{"ledger"}) {
		t.Errorf("no resourceVersion: upstreams %v, want [ledger]", got)
	}
	if got := upstreams(s, pod("c", "", "audit")); !slices.Equal(got, []string{"audit"}) {
		t.Errorf("no resourceVersion, annotations changed: upstreams %v, want [audit]", got)
	}
	if got := upstreams(nil, pod("a", "2", "ledger")); !slices.Equal(got, []string{"ledger"}) {
		t.Errorf("nil memo: upstreams %v, want [ledger]", got)
	}

	bad := pod("b", "7", "ledger")
	bad.Annotations[portspec.AnnotationPort] = "http"
	if _, err := s.parse(bad); err == nil {
		t.Fatal("a bad port annotation parsed")
	}
	bad.Annotations[portspec.AnnotationPort] = "8080"
	if _, err := s.parse(bad); err == nil {
		t.Error("same resourceVersion: the remembered error is gone")
	}
	if n := len(s.byUID); n != 2 {
		t.Errorf("%d pods remembered, want 2 (a and b; c has no resourceVersion)", n)
	}
	s.keep(map[types.UID]bool{"b": true})
	if n := len(s.byUID); n != 1 {
		t.Errorf("after keep(b): %d pods remembered, want 1", n)
	}
	if got := upstreams(s, pod("a", "2", "audit")); !slices.Equal(got, []string{"audit"}) {
		t.Errorf("a forgotten, parsed again: upstreams %v, want [audit]", got)
	}
}

// TestCaptureFactsCopies: what captureFacts returns is a copy: a caller changing it does not
// change the Spec the memo shares.
func TestCaptureFactsCopies(t *testing.T) {
	s := newPodSpecs()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "a", ResourceVersion: "1",
		Annotations: map[string]string{portspec.AnnotationPort: "8080", portspec.AnnotationUpstreams: "ledger"}}}
	_, ups := captureFacts(s.parse(pod))
	ups[0] = "changed"
	if _, again := captureFacts(s.parse(pod)); again[0] != "ledger" {
		t.Errorf("the remembered upstreams are %v after a caller changed its copy, want [ledger]", again)
	}
}
