// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1 "github.com/aether-mesh/aether-operator/api/config/v1"
	"github.com/aether-mesh/aether-operator/internal/conditions"
)

func endpointPolicy(ns, name, service, socket string) *configv1.EndpointPolicy {
	return &configv1.EndpointPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       configv1.EndpointPolicySpec{TargetRef: configv1.TargetRef{Kind: configv1.KindService, Name: service}, UDSSocket: socket},
	}
}

// waitAccepted waits until the policy's Accepted condition, for its current generation, has
// status and reason, and returns its message.
func waitAccepted(t *testing.T, ctx context.Context, key client.ObjectKey, status metav1.ConditionStatus, reason string) string {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		p := &configv1.EndpointPolicy{}
		if err := env.Client.Get(ctx, key, p); err != nil {
			return false, err
		}
		c := conditions.Find(p.Status.Conditions, configv1.PolicyConditionAccepted)
		if c == nil {
			last = "no Accepted condition"
			return false, nil
		}
		last = fmt.Sprintf("%s %s %q (generation %d of %d)", c.Status, c.Reason, c.Message, c.ObservedGeneration, p.Generation)
		return c.Status == status && c.Reason == reason && c.ObservedGeneration == p.Generation, nil
	})
	if err != nil {
		t.Fatalf("%s: Accepted never became %s (%s): last %s", key, status, reason, last)
	}
	p := &configv1.EndpointPolicy{}
	if err := env.Client.Get(ctx, key, p); err != nil {
		t.Fatal(err)
	}
	return conditions.Find(p.Status.Conditions, configv1.PolicyConditionAccepted).Message
}

// TestEndpointPolicyConflict: of two policies targeting one Service the lexicographically smallest
// name is Accepted and the other Conflicted, naming the winner; deleting the winner accepts the
// other; a policy of another Service is untouched.
func TestEndpointPolicyConflict(t *testing.T) {
	ctx := testContext(t)
	ns := namespaceWithSA(t, ctx, "echo")
	zeta, alpha := endpointPolicy(ns, "zeta", "echo", "s/z.sock"), endpointPolicy(ns, "alpha", "echo", "s/a.sock")
	other := endpointPolicy(ns, "other", "ledger", "s/o.sock")
	for _, p := range []*configv1.EndpointPolicy{zeta, other} {
		if err := env.Client.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	waitAccepted(t, ctx, client.ObjectKeyFromObject(zeta), metav1.ConditionTrue, configv1.PolicyReasonAccepted)

	if err := env.Client.Create(ctx, alpha); err != nil {
		t.Fatal(err)
	}
	msg := waitAccepted(t, ctx, client.ObjectKeyFromObject(zeta), metav1.ConditionFalse, configv1.PolicyReasonConflicted)
	want := "EndpointPolicy alpha also targets Service echo and wins (of the policies targeting one Service, the lexicographically " +
		"smallest name applies); delete this policy or alpha, or target another Service"
	if msg != want {
		t.Errorf("zeta's message\n got %s\nwant %s", msg, want)
	}
	waitAccepted(t, ctx, client.ObjectKeyFromObject(alpha), metav1.ConditionTrue, configv1.PolicyReasonAccepted)
	waitAccepted(t, ctx, client.ObjectKeyFromObject(other), metav1.ConditionTrue, configv1.PolicyReasonAccepted)

	if err := env.Client.Delete(ctx, alpha); err != nil {
		t.Fatal(err)
	}
	waitAccepted(t, ctx, client.ObjectKeyFromObject(zeta), metav1.ConditionTrue, configv1.PolicyReasonAccepted)
}

// TestEndpointPolicyInvalid: a policy whose socket does not parse (written where no webhook
// judged it: this package's API server has none) is Accepted=False, Invalid, with the parser's
// message.
func TestEndpointPolicyInvalid(t *testing.T) {
	ctx := testContext(t)
	ns := namespaceWithSA(t, ctx, "echo")
	bad := endpointPolicy(ns, "bad", "echo", "s/../app.sock")
	if err := env.Client.Create(ctx, bad); err != nil {
		t.Fatal(err)
	}
	msg := waitAccepted(t, ctx, client.ObjectKeyFromObject(bad), metav1.ConditionFalse, configv1.PolicyReasonInvalid)
	want := `spec.udsSocket: "s/../app.sock": "s/../app.sock" holds a ".." segment; the socket must lie directly inside the volume ` +
		`(write <volume>/<socket-file>: the name of the pod's csi.aether.io volume (not its mount path) and a file directly inside ` +
		`it, for example "uds/app.sock")`
	if msg != want {
		t.Errorf("message\n got %s\nwant %s", msg, want)
	}
}
