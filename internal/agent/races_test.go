// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/conditions"
	"github.com/aether-mesh/aether-operator/internal/portspec"
	"github.com/aether-mesh/aether-operator/internal/testenv"
)

func TestClassify(t *testing.T) {
	endpoints := schema.GroupResource{Group: meshv1alpha1.GroupVersion.Group, Resource: "meshendpoints"}
	terminating := apierrors.NewForbidden(schema.GroupResource{Resource: "events"}, "x",
		errors.New("unable to create new content in namespace t because it is being terminated"))
	terminating.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: corev1.NamespaceTerminatingCause, Field: "t"}}
	cases := map[string]struct {
		err  error
		want race
	}{
		"none":                           {nil, notARace},
		"not found":                      {apierrors.NewNotFound(endpoints, "web-0"), raceGone},
		"namespace terminating":          {terminating, raceGone},
		"conflict":                       {apierrors.NewConflict(endpoints, "web-0", errors.New("the object has been modified")), raceStale},
		"wrapped conflict":               {fmt.Errorf("writing status: %w", apierrors.NewConflict(endpoints, "web-0", errors.New("modified"))), raceStale},
		"already exists":                 {apierrors.NewAlreadyExists(endpoints, "web-0"), raceStale},
		"forbidden, not terminating":     {apierrors.NewForbidden(endpoints, "web-0", errors.New("denied by policy")), notARace},
		"invalid":                        {apierrors.NewInvalid(schema.GroupKind{Group: "mesh.aether.io", Kind: "MeshEndpoint"}, "web-0", nil), notARace},
		"timeout":                        {apierrors.NewTimeoutError("etcd", 1), notARace},
		"an error that is not the API's": {errors.New("connection refused"), notARace},
		"the agent stopping":             {fmt.Errorf("Patch \"https://127.0.0.1/status\": %w", context.Canceled), raceGone},
		"a request timing out":           {fmt.Errorf("Patch: %w", context.DeadlineExceeded), notARace},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := classify(tc.err); got != tc.want {
				t.Errorf("classify(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}

func TestRefusalEventName(t *testing.T) {
	pod := func(name, uid string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(uid)}}
	}
	long := strings.Repeat("a", 230) + "-" + strings.Repeat("b", 22) // 253 bytes, the most a name holds
	base := refusalEventName(pod("web-0", "u1"), ReasonInvalidAnnotation, "note", "")
	for name, tc := range map[string]struct {
		got      string
		same     bool
		wantHead string
	}{
		"deterministic":          {refusalEventName(pod("web-0", "u1"), ReasonInvalidAnnotation, "note", ""), true, "web-0."},
		"another pod (UID)":      {refusalEventName(pod("web-0", "u2"), ReasonInvalidAnnotation, "note", ""), false, "web-0."},
		"another reason":         {refusalEventName(pod("web-0", "u1"), ReasonDefaultServiceAccount, "note", ""), false, "web-0."},
		"another note":           {refusalEventName(pod("web-0", "u1"), ReasonInvalidAnnotation, "note 2", ""), false, "web-0."},
		"refused again later":    {refusalEventName(pod("web-0", "u1"), ReasonInvalidAnnotation, "note", "2026-11-30T08:00:00Z/2"), false, "web-0."},
		"a name of 253 bytes":    {refusalEventName(pod(long, "u1"), ReasonInvalidAnnotation, "note", ""), false, strings.Repeat("a", 230) + "-bbbbb."},
		"a cut ending in a dash": {refusalEventName(pod(strings.Repeat("a", 235)+"-"+strings.Repeat("c", 17), "u1"), ReasonInvalidAnnotation, "note", ""), false, strings.Repeat("a", 235) + "."},
		"a cut ending in a dot":  {refusalEventName(pod(strings.Repeat("a", 235)+"."+strings.Repeat("c", 17), "u1"), ReasonInvalidAnnotation, "note", ""), false, strings.Repeat("a", 235) + "."},
	} {
		t.Run(name, func(t *testing.T) {
			if (tc.got == base) != tc.same {
				t.Errorf("%q vs %q: same = %v, want %v", tc.got, base, tc.got == base, tc.same)
			}
			if !strings.HasPrefix(tc.got, tc.wantHead) || len(tc.got) > 253 {
				t.Errorf("%q (%d bytes): want it to start %q and hold at most 253 bytes", tc.got, len(tc.got), tc.wantHead)
			}
			if errs := validation.IsDNS1123Subdomain(tc.got); len(errs) > 0 {
				t.Errorf("%q is not an object name: %v", tc.got, errs)
			}
		})
	}
}

// racingClient is the real client with a concurrent writer that strikes once, right after the
// reconciler reads the MeshEndpoint named strikeOn: the window a real race needs, made certain.
// The conflict or absence the reconciler then meets is the API server's own.
type racingClient struct {
	client.Client
	strikeOn string
	strike   func(ctx context.Context, ep *meshEndpoint)
	once     *sync.Once
}

func (c racingClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	err := c.Client.Get(ctx, key, obj, opts...)
	if ep, isEndpoint := obj.(*meshEndpoint); err == nil && isEndpoint && key.Name == c.strikeOn {
		c.once.Do(func() { c.strike(ctx, ep.DeepCopy()) })
	}
	return err
}

// TestRacesAreNotErrors: a reconcile that loses a race (another writer changes the
// MeshEndpoint, or deletes it, between the read and the write; the namespace is being deleted)
// returns no error, retries when a write is still owed, and the retry converges. The
// reconciler is driven directly on a node no agent serves, so each race happens exactly once.
func TestRacesAreNotErrors(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t, ctx)
	node := "node-" + ns // no agent runs for it: the test's reconciler is its only writer
	good := map[string]string{portspec.AnnotationPorts: "8080,9000=tcp"}
	healthy := func(ctx context.Context, ep *meshEndpoint) {
		patch := client.MergeFrom(ep.DeepCopy())
		ep.Status.Health = meshv1alpha1.HealthHealthy
		if err := env.Client.Status().Patch(ctx, ep, patch); err != nil {
			t.Errorf("the concurrent writer: %v", err)
		}
	}
	labelled := func(ctx context.Context, ep *meshEndpoint) {
		patch := client.MergeFrom(ep.DeepCopy())
		ep.Labels = map[string]string{"example.com/touched": "yes"}
		if err := env.Client.Patch(ctx, ep, patch); err != nil {
			t.Errorf("the concurrent writer: %v", err)
		}
	}
	deleted := func(ctx context.Context, ep *meshEndpoint) {
		if err := env.Client.Delete(ctx, ep); err != nil {
			t.Errorf("the concurrent writer: %v", err)
		}
	}
	verifiedByController := func(ctx context.Context, ep *meshEndpoint) {
		patch := client.MergeFrom(ep.DeepCopy())
		// Set, not append: the suite's real MeshService controller may have written its verdict.
		ep.Status.Conditions = conditions.Set(ep.Status.Conditions, metav1.Condition{Type: "Verified", Status: metav1.ConditionTrue,
			Reason: "RealPod", Message: "matches its pod, says the staged writer"}, ep.Generation, metav1.Now())
		if err := env.Client.Status().Patch(ctx, ep, patch); err != nil {
			t.Errorf("the concurrent writer: %v", err)
		}
	}

	for i, tc := range []struct {
		name string
		// before is the pod's annotations when the endpoint is first registered; during, when
		// the racing reconcile runs (nil: unchanged).
		before, during map[string]string
		strike         func(context.Context, *meshEndpoint)
		wantRetry      bool
		// then checks the endpoint once a plain reconcile followed.
		then func(*meshEndpoint) error
	}{
		{name: "status write conflicts with the prober", before: good, strike: healthy, wantRetry: true,
			then: func(ep *meshEndpoint) error {
				if c := conditions.Find(ep.Status.Conditions, meshv1alpha1.EndpointConditionRegistered); c == nil || c.Status != metav1.ConditionTrue || ep.Status.Health != meshv1alpha1.HealthHealthy {
					return fmt.Errorf("want Registered=True and the prober's Healthy: %+v", ep.Status)
				}
				return nil
			}},
		{name: "spec rewrite conflicts with another writer", before: good, during: map[string]string{portspec.AnnotationPorts: "8080,9090=h2"},
			strike: labelled, wantRetry: true,
			then: func(ep *meshEndpoint) error {
				if ep.Spec.PortsSummary != "8080/HTTP,9090/HTTP2" {
					return fmt.Errorf("ports %s", ep.Spec.PortsSummary)
				}
				return nil
			}},
		{name: "refusal's status write conflicts: retried, then said once", before: good, during: map[string]string{portspec.AnnotationPorts: "9000=tpc"},
			strike: labelled, wantRetry: true,
			then: func(ep *meshEndpoint) error {
				if c := conditions.Find(ep.Status.Conditions, meshv1alpha1.EndpointConditionRegistered); c == nil || c.Status != metav1.ConditionFalse {
					return fmt.Errorf("want Registered=False: %+v", ep.Status.Conditions)
				}
				return nil
			}},
		{name: "another writer's condition survives the agent's status write", before: good, strike: verifiedByController, wantRetry: true,
			then: func(ep *meshEndpoint) error {
				if c := conditions.Find(ep.Status.Conditions, "Verified"); c == nil || c.Status != metav1.ConditionTrue {
					return fmt.Errorf("the controller's Verified condition is gone: %+v", ep.Status.Conditions)
				}
				if c := conditions.Find(ep.Status.Conditions, meshv1alpha1.EndpointConditionRegistered); c == nil || c.Status != metav1.ConditionTrue {
					return fmt.Errorf("want Registered=True: %+v", ep.Status.Conditions)
				}
				return nil
			}},
		{name: "endpoint deleted before the status write", before: good, strike: deleted, wantRetry: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := fmt.Sprintf("race-%d", i)
			plain := &PodReconciler{Client: env.Client, NodeName: node}
			req := ctrl.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: name}}
			pod := createPod(t, ctx, ns, name, node, newPodIP(), true, tc.before)
			if _, err := plain.Reconcile(ctx, req); err != nil { // creates the endpoint, and its status
				t.Fatal(err)
			}
			// The status is taken back, so that the reconcile under test owes its first write (read
			// again if the suite's MeshService controller writes its verdict meanwhile).
			if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
				ep, err := getEndpoint(ctx, ns, name)
				if err != nil {
					return err
				}
				ep.Status = meshv1alpha1.MeshEndpointStatus{}
				return env.Client.Status().Update(ctx, ep)
			}); err != nil {
				t.Fatal(err)
			}
			if tc.during != nil {
				if err := env.Client.Get(ctx, req.NamespacedName, pod); err != nil {
					t.Fatal(err)
				}
				pod.Annotations = tc.during
				if err := env.Client.Update(ctx, pod); err != nil {
					t.Fatal(err)
				}
			}
			before := refusals(t, portspec.KindUnknownSuffix)

			racing := &PodReconciler{Client: racingClient{Client: env.Client, strikeOn: name, strike: tc.strike, once: &sync.Once{}}, NodeName: node}
			result, err := racing.Reconcile(ctx, req)
			if err != nil {
				t.Fatalf("a lost race is an error: %v", err)
			}
			if retry := result.RequeueAfter > 0; retry != tc.wantRetry {
				t.Errorf("retry = %v (%+v), want %v: the write is still owed", retry, result, tc.wantRetry)
			}
			if tc.then == nil {
				return
			}
			// The retry, the staged race over. The suite's MeshService controller writes its own
			// verdict on the same status and may win another round: retry as the queue would.
			testenv.Eventually(t, "the retried write", func() error {
				if _, err := racing.Reconcile(ctx, req); err != nil {
					return fmt.Errorf("a lost race is an error: %w", err)
				}
				ep, err := getEndpoint(ctx, ns, name)
				if err != nil {
					return err
				}
				return tc.then(ep)
			})
			if tc.during != nil && tc.during[portspec.AnnotationPorts] == "9000=tpc" {
				if got := refusals(t, portspec.KindUnknownSuffix) - before; got != 1 {
					t.Errorf("refusal counted %v times, want 1", got)
				}
			}
		})
	}

	t.Run("namespace being deleted", func(t *testing.T) {
		doomed := namespace(t, ctx)
		r := &PodReconciler{Client: env.Client, NodeName: node}
		createPod(t, ctx, doomed, "valid", node, newPodIP(), true, good)
		createPod(t, ctx, doomed, "refused", node, newPodIP(), true, map[string]string{portspec.AnnotationPorts: "9000=tpc"})
		// With no namespace controller here, the namespace stays Terminating with its pods.
		if err := env.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: doomed}}); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"valid", "refused"} {
			result, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKey{Namespace: doomed, Name: name}})
			if err != nil || result.RequeueAfter > 0 {
				t.Errorf("pod %s in a namespace being deleted: %+v, %v; want nothing to do", name, result, err)
			}
		}
	})
}
