// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package endpointpolicy

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	configv1 "github.com/aether-mesh/aether-operator/api/config/v1"
)

func policy(ns, name, service, socket string) configv1.EndpointPolicy {
	return configv1.EndpointPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       configv1.EndpointPolicySpec{TargetRef: configv1.TargetRef{Kind: configv1.KindService, Name: service}, UDSSocket: socket},
	}
}

func TestWinner(t *testing.T) {
	all := []configv1.EndpointPolicy{
		policy("a", "zeta", "echo", "s/z.sock"),
		policy("a", "alpha", "echo", "s/a.sock"),
		policy("b", "aaa", "echo", "s/b.sock"), // another namespace's Service of the same name
		policy("a", "beta", "other", "s/o.sock"),
	}
	tests := map[string]struct {
		ns, service, want string
	}{
		"smallest name wins":  {"a", "echo", "alpha"},
		"one policy":          {"a", "other", "beta"},
		"namespace is scoped": {"b", "echo", "aaa"},
		"no policy":           {"a", "none", ""},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got := Winner(all, tt.ns, tt.service)
			switch {
			case tt.want == "" && got != nil:
				t.Errorf("Winner = %s, want none", got.Name)
			case tt.want != "" && (got == nil || got.Name != tt.want):
				t.Errorf("Winner = %v, want %s", got, tt.want)
			}
		})
	}
}

func TestAccepted(t *testing.T) {
	alpha, zeta := policy("a", "alpha", "echo", "s/app.sock"), policy("a", "zeta", "echo", "s/app.sock")
	bad := policy("a", "bad", "lonely", "s/x/app.sock")
	tests := map[string]struct {
		p      configv1.EndpointPolicy
		all    []configv1.EndpointPolicy
		status metav1.ConditionStatus
		reason string
		msg    string
	}{
		"alone": {p: alpha, all: nil, status: metav1.ConditionTrue, reason: configv1.PolicyReasonAccepted,
			msg: "the pods of Service echo without an endpoint.aether.io/uds-socket annotation of their own are delivered to s/app.sock"},
		"winner": {p: alpha, all: []configv1.EndpointPolicy{alpha, zeta}, status: metav1.ConditionTrue, reason: configv1.PolicyReasonAccepted},
		"loser": {p: zeta, all: []configv1.EndpointPolicy{alpha, zeta}, status: metav1.ConditionFalse, reason: configv1.PolicyReasonConflicted,
			msg: "EndpointPolicy alpha also targets Service echo and wins (of the policies targeting one Service, the lexicographically " +
				"smallest name applies); delete this policy or alpha, or target another Service"},
		"malformed": {p: bad, all: []configv1.EndpointPolicy{bad}, status: metav1.ConditionFalse, reason: configv1.PolicyReasonInvalid,
			msg: `spec.udsSocket: "s/x/app.sock": "s/x/app.sock" has 3 path segments; want exactly two, the volume and a file directly ` +
				`inside it (no subdirectories) (write <volume>/<socket-file>: the name of the pod's csi.aether.io volume (not its mount ` +
				`path) and a file directly inside it, for example "uds/app.sock")`},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			c := Accepted(&tt.p, tt.all)
			if c.Type != configv1.PolicyConditionAccepted || c.Status != tt.status || c.Reason != tt.reason {
				t.Errorf("Accepted = %s=%s (%s), want %s (%s): %s", c.Type, c.Status, c.Reason, tt.status, tt.reason, c.Message)
			}
			if tt.msg != "" && c.Message != tt.msg {
				t.Errorf("message\n got %s\nwant %s", c.Message, tt.msg)
			}
		})
	}
}
