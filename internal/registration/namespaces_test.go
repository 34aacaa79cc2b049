// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package registration

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestParseIgnoredNamespaces(t *testing.T) {
	defaults, err := ParseIgnoredNamespaces(strings.Join(DefaultIgnoredNamespaces, ","))
	if err != nil {
		t.Fatal(err)
	}
	if got := defaults.String(); got != "aether-operator-system,kube-node-lease,kube-public,kube-system" {
		t.Errorf("defaults = %q", got)
	}
	spaced, err := ParseIgnoredNamespaces(" a , b,,")
	if err != nil || spaced.String() != "a,b" {
		t.Errorf(`" a , b,," = %q, %v; want "a,b"`, spaced.String(), err)
	}
	for _, bad := range []string{"Kube-System", "a,b_c", "-x", strings.Repeat("n", 64)} {
		_, err := ParseIgnoredNamespaces(bad)
		if err == nil || !strings.Contains(err.Error(), "--ignored-namespaces") || !strings.Contains(err.Error(), "is not a namespace name") {
			t.Errorf("%q: err = %v, want one naming the flag and the element", bad, err)
		}
	}
	if none, err := ParseIgnoredNamespaces(""); err != nil || len(none) != 0 {
		t.Errorf(`"" = %v, %v; want the empty set (the mesh takes every namespace)`, none, err)
	}
}

func TestInMesh(t *testing.T) {
	ignored := IgnoredNamespaces{"kube-system": true}.With("mesh-operator")
	pod := func(ns, label string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Labels: map[string]string{LabelManaged: label}}}
	}
	for _, tc := range []struct {
		pod  *corev1.Pod
		want bool
	}{
		{pod("shop", "true"), true},
		{pod("shop", "True"), false},
		{pod("kube-system", "true"), false},
		{pod("mesh-operator", "true"), false},
		{pod("kube-public", "true"), true}, // not in this set
	} {
		if got := ignored.InMesh(tc.pod); got != tc.want {
			t.Errorf("InMesh(%s, %q) = %v, want %v", tc.pod.Namespace, tc.pod.Labels[LabelManaged], got, tc.want)
		}
		if got, _ := ignored.Verdict(tc.pod); got != tc.want {
			t.Errorf("Verdict(%s, %q) = %v, want InMesh's %v", tc.pod.Namespace, tc.pod.Labels[LabelManaged], got, tc.want)
		}
	}
	if got := ignored.With("").String(); got != "kube-system,mesh-operator" {
		t.Errorf("With(\"\") changed the set: %q", got)
	}
}

func TestVerdictSaysWhy(t *testing.T) {
	ignored := IgnoredNamespaces{"kube-system": true}
	unlabelled := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop"}}
	for name, tc := range map[string]struct {
		pod  *corev1.Pod
		want string
	}{
		"managed":    {&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Labels: map[string]string{LabelManaged: "true"}}}, "it is labelled aether.io/managed=true"},
		"ignored":    {&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Labels: map[string]string{LabelManaged: "true"}}}, "namespace kube-system is ignored by the mesh (--ignored-namespaces)"},
		"unlabelled": {unlabelled, "it has no label aether.io/managed"},
		"other":      {&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Labels: map[string]string{LabelManaged: "yes"}}}, `its label aether.io/managed is "yes", not "true"`},
	} {
		t.Run(name, func(t *testing.T) {
			if _, why := ignored.Verdict(tc.pod); why != tc.want {
				t.Errorf("why = %q, want %q", why, tc.want)
			}
		})
	}
}
