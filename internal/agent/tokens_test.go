// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/aether-mesh/aether-operator/internal/testenv"
)

// TestServiceAccountTokenRenewsBeforeExpiry (a unit test of Token; the real TokenRequest is
// TestPluginKubeconfigCanOnlyGetPods's): it asks for the lifetime and binding it was given, hands
// the same token out until four fifths of the lifetime the API server granted have passed, then
// asks again; Current stops handing out a token once it expired.
func TestServiceAccountTokenRenewsBeforeExpiry(t *testing.T) {
	var issued atomic.Int32
	granted := 500 * time.Millisecond // what the API server grants, whatever was asked
	cs := fake.NewClientset()
	var asked *authenticationv1.TokenRequest
	cs.PrependReactor("create", "serviceaccounts", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() != "token" {
			return false, nil, nil
		}
		asked = action.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenRequest)
		n := issued.Add(1)
		return true, &authenticationv1.TokenRequest{Status: authenticationv1.TokenRequestStatus{
			Token: fmt.Sprintf("token-%d", n), ExpirationTimestamp: metav1.NewTime(time.Now().Add(granted))}}, nil
	})
	s := &ServiceAccountToken{Client: cs.CoreV1(), Namespace: "mesh-system", Name: "cni", BoundPod: "agent-x", Lifetime: time.Hour}
	ctx := context.Background()
	first, err := s.Token(ctx)
	if err != nil || first != "token-1" {
		t.Fatalf("Token = %q, %v", first, err)
	}
	if got := asked.Spec; got.ExpirationSeconds == nil || *got.ExpirationSeconds != 3600 || got.BoundObjectRef == nil ||
		got.BoundObjectRef.Kind != "Pod" || got.BoundObjectRef.Name != "agent-x" || len(got.Audiences) != 0 {
		t.Errorf("asked for %+v; want 3600 s, bound to pod agent-x, the API server's audience", got)
	}
	if again, _ := s.Token(ctx); again != first || issued.Load() != 1 {
		t.Errorf("a fresh token asked again: %q after %d requests", again, issued.Load())
	}
	testenv.Eventually(t, "a new token once four fifths of the granted lifetime passed", func() error {
		if tok, err := s.Token(ctx); err != nil || tok == first {
			return errors.Join(fmt.Errorf("still %q", tok), err)
		}
		return nil
	})
	if tok, ok := s.Current(); !ok || tok == first {
		t.Errorf("Current = %q, %v; want the renewed token", tok, ok)
	}
	expired := &ServiceAccountToken{token: "old", expires: time.Now().Add(-time.Second)}
	if tok, ok := expired.Current(); ok {
		t.Errorf("an expired token handed out: %q", tok)
	}
}
