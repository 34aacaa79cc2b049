// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package invariant

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	configv1 "github.com/aether-mesh/aether-operator/api/config/v1"
	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/controller"
)

// snapshot is what Check lists once.
type snapshot struct {
	pods      []corev1.Pod
	endpoints []meshv1alpha1.MeshEndpoint
	services  []meshv1alpha1.MeshService
	// policies are the AccessPolicies: each MeshService port lists those that govern it.
	policies []configv1.AccessPolicy
	accounts map[client.ObjectKey]bool
	nodes    map[string]*corev1.Node
	// kubeServices are the Services, by namespace and name.
	kubeServices map[client.ObjectKey]*corev1.Service
	// routes are the routes of the kinds the cluster serves (routeLists).
	routes []client.Object
	// verdict is the controller's verdict on each MeshEndpoint, by namespace and name.
	verdict map[client.ObjectKey]metav1.Condition
}

// read lists the snapshot, or returns the reads that failed.
func read(ctx context.Context, c client.Reader, opts Options) (snapshot, []Violation) {
	var (
		s        snapshot
		failed   []Violation
		pods     corev1.PodList
		eps      meshv1alpha1.MeshEndpointList
		mss      meshv1alpha1.MeshServiceList
		accounts corev1.ServiceAccountList
		policies configv1.AccessPolicyList
		nodes    corev1.NodeList
	)
	scope := []client.ListOption{client.InNamespace(opts.Namespace)}
	for kind, list := range map[string]client.ObjectList{"Pod": &pods, "MeshEndpoint": &eps, "MeshService": &mss, "ServiceAccount": &accounts,
		"AccessPolicy": &policies} {
		if err := c.List(ctx, list, scope...); err != nil {
			failed = append(failed, readFailed(kind, opts.Namespace, "", err))
		}
	}
	if err := c.List(ctx, &nodes); err != nil {
		failed = append(failed, readFailed("Node", "", "", err))
	}
	var kubeServices corev1.ServiceList
	if err := c.List(ctx, &kubeServices, scope...); err != nil {
		failed = append(failed, readFailed("Service", opts.Namespace, "", err))
	}
	routes, routesFailed := readRoutes(ctx, c, scope)
	failed = append(failed, routesFailed...)
	s.pods, s.endpoints, s.services, s.routes, s.policies = pods.Items, eps.Items, mss.Items, routes, policies.Items
	s.kubeServices = map[client.ObjectKey]*corev1.Service{}
	for i := range kubeServices.Items {
		s.kubeServices[client.ObjectKeyFromObject(&kubeServices.Items[i])] = &kubeServices.Items[i]
	}
	s.accounts = map[client.ObjectKey]bool{}
	for _, sa := range accounts.Items {
		s.accounts[client.ObjectKeyFromObject(&sa)] = true
	}
	s.nodes = map[string]*corev1.Node{}
	for i := range nodes.Items {
		s.nodes[nodes.Items[i].Name] = &nodes.Items[i]
	}
	if len(failed) == 0 {
		s.verdict = s.verdicts(ctx, opts)
	}
	return s, failed
}

// readRoutes lists the routes of the four kinds, each with its kind set (a typed list's items
// carry none); a kind whose CRD the cluster does not serve has none (the controller skips it too).
func readRoutes(ctx context.Context, c client.Reader, scope []client.ListOption) ([]client.Object, []Violation) {
	var (
		out    []client.Object
		failed []Violation
	)
	for kind, list := range routeLists() {
		err := c.List(ctx, list, scope...)
		if meta.IsNoMatchError(err) {
			continue
		}
		var items []runtime.Object
		if err == nil {
			items, err = meta.ExtractList(list)
		}
		if err != nil {
			failed = append(failed, readFailed(string(kind), "", "", err))
			continue
		}
		for _, item := range items {
			route := item.(client.Object)
			route.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{Group: gwapiv1.GroupName, Version: gwapiv1.GroupVersion.Version, Kind: string(kind)})
			out = append(out, route)
		}
	}
	return out, failed
}

// podReader reads pods from the snapshot, so that each endpoint's verdict costs no request
// (Check is polled, during faults: it must not load the API server it watches).
type podReader struct {
	client.Reader
	pods map[client.ObjectKey]*corev1.Pod
}

func (r podReader) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return fmt.Errorf("the snapshot holds pods only, not %T", obj)
	}
	found := r.pods[key]
	if found == nil {
		return apierrors.NewNotFound(corev1.Resource("pods"), key.Name)
	}
	found.DeepCopyInto(pod)
	return nil
}

// verdicts are the controller's verdicts on each endpoint (controller.EndpointVerdict), against
// the snapshot's pods.
func (s snapshot) verdicts(ctx context.Context, opts Options) map[client.ObjectKey]metav1.Condition {
	pods := podReader{pods: map[client.ObjectKey]*corev1.Pod{}}
	for i := range s.pods {
		pods.pods[client.ObjectKeyFromObject(&s.pods[i])] = &s.pods[i]
	}
	out := map[client.ObjectKey]metav1.Condition{}
	for i := range s.endpoints {
		ep := &s.endpoints[i]
		verdict, _ := controller.EndpointVerdict(ctx, pods, ep, opts.Ignored) // the snapshot answers pods only, found or not found
		out[client.ObjectKeyFromObject(ep)] = verdict
	}
	return out
}
