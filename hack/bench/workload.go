// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/agent"
	"github.com/aether-mesh/aether-operator/internal/conditions"
	"github.com/aether-mesh/aether-operator/internal/portspec"
	"github.com/aether-mesh/aether-operator/internal/registration"
)

// servicesPerNamespace spreads the services over namespaces, as a cluster's teams would.
const servicesPerNamespace = 100

// ports every benchmark pod declares: an HTTP primary and a TCP port, so the generated Service
// and the status carry both protocols' defaults.
var ports = []portspec.Port{{Port: 8080, Protocol: meshv1alpha1.ProtocolHTTP}, {Port: 9000, Protocol: meshv1alpha1.ProtocolTCP}}

// workload is the services and endpoints of one size: service s's endpoint j is written by
// writer (s×M+j) mod W, the agent of node bench-node-<writer>.
type workload struct {
	size      size
	writers   int
	services  []types.NamespacedName
	endpoints [][]*endpoint // by service
	nextIP    atomic.Uint32
}

// endpoint is one pod and its MeshEndpoint.
type endpoint struct {
	key    types.NamespacedName // the pod's, and its MeshEndpoint's
	svc    string
	writer int
	node   string // the node its pod runs on, when not its writer's (the agent process's pods)
	ip     string
	pod    *corev1.Pod
	// upstreams is the pod's config.aether.io/upstreams, if it declares any.
	upstreams string
}

func newWorkload(sz size, writers int) *workload {
	w := &workload{size: sz, writers: writers}
	for s := range sz.services {
		svc := types.NamespacedName{Namespace: fmt.Sprintf("bench-%02d", s/servicesPerNamespace), Name: fmt.Sprintf("svc-%04d", s)}
		w.services = append(w.services, svc)
		var eps []*endpoint
		for j := range sz.endpoints {
			eps = append(eps, &endpoint{key: types.NamespacedName{Namespace: svc.Namespace, Name: fmt.Sprintf("%s-%02d", svc.Name, j)},
				svc: svc.Name, writer: (s*sz.endpoints + j) % writers, ip: w.newIP()})
		}
		w.endpoints = append(w.endpoints, eps)
	}
	return w
}

// newIP hands out pod IPs in 127.1.0.0/16 and up: loopback, which nothing here dials.
func (w *workload) newIP() string {
	n := w.nextIP.Add(1)
	return fmt.Sprintf("127.%d.%d.%d", 1+n>>16, n>>8&0xff, n&0xff)
}

// serviceOf maps an endpoint's namespace/name to its service's namespace/name.
func (w *workload) serviceOf(endpoint string) string {
	ns, name, _ := strings.Cut(endpoint, "/")
	return ns + "/" + name[:len("svc-0000")]
}

func nodeName(writer int) string { return fmt.Sprintf("bench-node-%02d", writer) }

// namespaces lists the workload's namespaces once each.
func (w *workload) namespaces() []string {
	var out []string
	for _, svc := range w.services {
		if len(out) == 0 || out[len(out)-1] != svc.Namespace {
			out = append(out, svc.Namespace)
		}
	}
	return out
}

// expected maps each service to its endpoints' names, for the tracker.
func (w *workload) expected() map[types.NamespacedName][]string {
	out := map[types.NamespacedName][]string{}
	for s, svc := range w.services {
		for _, ep := range w.endpoints[s] {
			out[svc] = append(out[svc], ep.key.Name)
		}
	}
	return out
}

// byWriter lists every endpoint by the writer that registers it, in service order.
func (w *workload) byWriter(pick func(*endpoint) bool) [][]*endpoint {
	out := make([][]*endpoint, w.writers)
	for _, eps := range w.endpoints {
		for _, ep := range eps {
			if pick(ep) {
				out[ep.writer] = append(out[ep.writer], ep)
			}
		}
	}
	return out
}

// podFor is the managed pod of ep as a kubelet would run it (not yet created): its
// ServiceAccount is its service, its annotations declare the benchmark's ports (and its upstreams,
// if any).
func podFor(ep *endpoint) *corev1.Pod {
	node := nodeName(ep.writer)
	if ep.node != "" {
		node = ep.node
	}
	annotations := map[string]string{portspec.AnnotationPort: fmt.Sprint(ports[0].Port), portspec.AnnotationPorts: portspec.FormatPortsAnnotation(ports)}
	if ep.upstreams != "" {
		annotations[portspec.AnnotationUpstreams] = ep.upstreams
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ep.key.Namespace, Name: ep.key.Name,
			Labels:      map[string]string{registration.LabelManaged: registration.ManagedValue},
			Annotations: annotations},
		Spec: corev1.PodSpec{NodeName: node, ServiceAccountName: ep.svc,
			Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}}},
	}
}

// createPod creates ep's pod and gives it its IP through the status subresource, as the
// scheduler and kubelet would (none runs here).
func createPod(ctx context.Context, c client.Client, ep *endpoint) error {
	pod := podFor(ep)
	if err := c.Create(ctx, pod); err != nil {
		return fmt.Errorf("creating pod %s: %w", ep.key, err)
	}
	pod.Status.PodIP, pod.Status.PodIPs, pod.Status.Phase = ep.ip, []corev1.PodIP{{IP: ep.ip}}, corev1.PodRunning
	if err := c.Status().Update(ctx, pod); err != nil {
		return fmt.Errorf("setting the IP of pod %s: %w", ep.key, err)
	}
	ep.pod = pod
	return nil
}

// deletePod removes ep's pod at once (no kubelet runs to finish a graceful deletion).
func deletePod(ctx context.Context, c client.Client, ep *endpoint) error {
	return client.IgnoreNotFound(c.Delete(ctx, ep.pod, client.GracePeriodSeconds(0)))
}

// agentWriter writes MeshEndpoints as the node agent of one node does (internal/agent's
// PodReconciler and Prober): a create under the agent's field manager owned by the pod, a status
// patch with Registered and Pending health, then the prober's health patch; both patches merge
// patches with an optimistic lock, retried from a fresh read on a conflict, as the agent's next
// reconcile or probe round would. It speaks as the agent with its node's claim, under the
// node-authority admission policy.
type agentWriter struct {
	c         client.Client
	conflicts *atomic.Int64
}

// register creates the MeshEndpoint of pod and makes it Registered and Healthy.
func (a *agentWriter) register(ctx context.Context, pod *corev1.Pod) (*meshv1alpha1.MeshEndpoint, error) {
	ep, err := a.create(ctx, pod)
	if err != nil {
		return nil, err
	}
	if ep, err = a.markRegistered(ctx, ep); err != nil {
		return nil, err
	}
	return a.setHealth(ctx, ep, meshv1alpha1.HealthHealthy)
}

// registerAnswering creates the MeshEndpoint of pod and makes it Registered and Healthy in one
// status write, as the agent does when the pod answers its first probe at once.
func (a *agentWriter) registerAnswering(ctx context.Context, pod *corev1.Pod) (*meshv1alpha1.MeshEndpoint, error) {
	ep, err := a.create(ctx, pod)
	if err != nil {
		return nil, err
	}
	return a.patchStatus(ctx, ep, func(ep *meshv1alpha1.MeshEndpoint) {
		registered(ep)
		ep.Status.Health = meshv1alpha1.HealthHealthy
	})
}

// create writes pod's MeshEndpoint as the agent's PodReconciler.create does.
func (a *agentWriter) create(ctx context.Context, pod *corev1.Pod) (*meshv1alpha1.MeshEndpoint, error) {
	ep, err := endpointOf(pod)
	if err != nil {
		return nil, err
	}
	if err := a.c.Create(ctx, ep, client.FieldOwner(agent.FieldManager)); err != nil {
		return nil, fmt.Errorf("agent: creating MeshEndpoint %s/%s: %w", ep.Namespace, ep.Name, err)
	}
	return ep, nil
}

// endpointOf is the MeshEndpoint the agent registers for pod (node locality aside: no Node
// objects exist here).
func endpointOf(pod *corev1.Pod) (*meshv1alpha1.MeshEndpoint, error) {
	spec, err := registration.Registration(pod, nil)
	if err != nil {
		return nil, err
	}
	owner := metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID, Controller: new(true)}
	return &meshv1alpha1.MeshEndpoint{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, OwnerReferences: []metav1.OwnerReference{owner}},
		Spec:       spec,
	}, nil
}

// markRegistered writes what the agent's setStatus writes on a new endpoint.
func (a *agentWriter) markRegistered(ctx context.Context, ep *meshv1alpha1.MeshEndpoint) (*meshv1alpha1.MeshEndpoint, error) {
	return a.patchStatus(ctx, ep, registered)
}

// registered makes ep's status what the agent's setStatus writes on a new endpoint.
func registered(ep *meshv1alpha1.MeshEndpoint) {
	if ep.Status.Health == "" {
		ep.Status.Health = meshv1alpha1.HealthPending
	}
	ep.Status.ObservedGeneration = ep.Generation
	ep.Status.Conditions = conditions.Set(ep.Status.Conditions, metav1.Condition{Type: meshv1alpha1.EndpointConditionRegistered,
		Status: metav1.ConditionTrue, Reason: meshv1alpha1.EndpointReasonRegistered, Message: "the MeshEndpoint matches the pod's annotations"},
		ep.Generation, metav1.NewTime(time.Now().Truncate(time.Second)))
}

// setHealth writes what the agent's Prober writes when an endpoint's health changes.
func (a *agentWriter) setHealth(ctx context.Context, ep *meshv1alpha1.MeshEndpoint, health meshv1alpha1.Health) (*meshv1alpha1.MeshEndpoint, error) {
	return a.patchStatus(ctx, ep, func(ep *meshv1alpha1.MeshEndpoint) { ep.Status.Health = health })
}

// patchStatus applies change to ep's status with an optimistic lock; on a conflict (the
// manager's Verified landed first) it reads ep again and retries, as the agent's next round does.
func (a *agentWriter) patchStatus(ctx context.Context, ep *meshv1alpha1.MeshEndpoint, change func(*meshv1alpha1.MeshEndpoint)) (*meshv1alpha1.MeshEndpoint, error) {
	for attempt := 0; ; attempt++ {
		patch := client.MergeFromWithOptions(ep.DeepCopy(), client.MergeFromWithOptimisticLock{})
		updated := ep.DeepCopy()
		change(updated)
		err := a.c.Status().Patch(ctx, updated, patch)
		if err == nil {
			return updated, nil
		}
		if !apierrors.IsConflict(err) || attempt == 20 {
			return nil, fmt.Errorf("agent: patching the status of MeshEndpoint %s/%s: %w", ep.Namespace, ep.Name, err)
		}
		a.conflicts.Add(1)
		fresh := &meshv1alpha1.MeshEndpoint{}
		if err := a.c.Get(ctx, client.ObjectKeyFromObject(ep), fresh); err != nil {
			return nil, fmt.Errorf("agent: reading MeshEndpoint %s/%s again: %w", ep.Namespace, ep.Name, err)
		}
		ep = fresh
	}
}

// remove deletes ep's MeshEndpoint as the agent does once its pod is gone.
func (a *agentWriter) remove(ctx context.Context, key types.NamespacedName) error {
	ep := &meshv1alpha1.MeshEndpoint{}
	if err := a.c.Get(ctx, key, ep); err != nil {
		return client.IgnoreNotFound(err)
	}
	return client.IgnoreNotFound(a.c.Delete(ctx, ep, client.Preconditions{UID: &ep.UID}))
}

// parallel runs each worker's items in order, the workers at once, and returns the first error.
func parallel[T any](ctx context.Context, perWorker [][]T, do func(ctx context.Context, worker int, item T) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	for worker, items := range perWorker {
		wg.Go(func() {
			for _, item := range items {
				if ctx.Err() != nil {
					return
				}
				if err := do(ctx, worker, item); err != nil {
					cancel(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return ctx.Err()
}

// spread deals items over n workers round-robin.
func spread[T any](items []T, n int) [][]T {
	out := make([][]T, n)
	for i, item := range items {
		out[i%n] = append(out[i%n], item)
	}
	return out
}
