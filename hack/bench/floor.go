// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"sigs.k8s.io/controller-runtime/pkg/client"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/conditions"
	"github.com/aether-mesh/aether-operator/internal/controller"
	"github.com/aether-mesh/aether-operator/internal/meshservice"
	"github.com/aether-mesh/aether-operator/internal/registration"
	"github.com/aether-mesh/aether-operator/internal/resolve"
)

// The kinds of write a change needs, each with the writer that makes it.
const (
	kindEndpointCreate   = "meshendpoints create (agent)"
	kindEndpointStatus   = "meshendpoints/status patch (agent)"
	kindEndpointVerified = "meshendpoints/status patch (manager)"
	kindServiceCreate    = "meshservices create (manager)"
	kindServiceStatus    = "meshservices/status update (manager)"
	kindGeneratedService = "services create (manager)"
)

// floorNamespace holds the floor's objects, deleted before the manager starts.
const floorNamespace = "bench-floor"

// floor is one kind's write rate with no controller running: the API server's own limit for that
// write at that concurrency and client setting.
type floor struct {
	Round       int     `json:"round"` // 1: before the manager ran, 2: after it stopped
	Kind        string  `json:"kind"`
	Concurrency int     `json:"concurrency"`
	Sampled     int     `json:"sampled"`
	WritesPerS  float64 `json:"writes_per_s"`
	Required    int     `json:"required"` // of this size's change
}

// A floor times at most floorSample writes of a kind, for at most floorBudget: enough to be
// above noise, and the whole floor stays a few seconds per kind on a loaded machine.
const (
	floorSample = 1000
	floorBudget = time.Second
)

// floors measures every kind, in the order the change makes them: agents' writes with the
// agents' clients and concurrency, the manager's with its client settings and worker count.
func (r *run) floors(ctx context.Context, round int) ([]floor, error) {
	if err := r.env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: floorNamespace}}); client.IgnoreAlreadyExists(err) != nil {
		return nil, err
	}
	e, n := r.size.services*r.size.endpoints, r.size.services
	agents := r.cfg.writers
	workers := r.cfg.workers

	// Endpoints of pods that are never created (no controller verifies them here), spread over
	// the writers' nodes as the change's are, grouped into services as the change's are.
	endpoints := make([]*meshv1alpha1.MeshEndpoint, min(e, floorSample))
	pods := make([]*corev1.Pod, len(endpoints))
	for i := range endpoints {
		ep := &endpoint{key: types.NamespacedName{Namespace: floorNamespace, Name: fmt.Sprintf("floor-%05d", i)},
			svc: fmt.Sprintf("floor-svc-%04d", i/r.size.endpoints), writer: i % agents, ip: r.work.newIP()}
		pods[i] = podFor(ep)
		pods[i].UID = uuid.NewUUID()
		pods[i].Status.PodIP = ep.ip
	}
	if err := r.warmUp(ctx, agents); err != nil {
		return nil, err
	}
	var out []floor
	// measure runs write over each worker's items in order, all workers at once, until the items
	// or the budget run out; the rate is the writes done over the time taken.
	measure := func(kind string, perWorker [][]int, required int, write func(ctx context.Context, worker, i int) error) error {
		var done atomic.Int64
		start := time.Now()
		err := parallel(ctx, perWorker, func(ctx context.Context, worker, i int) error {
			if time.Since(start) > floorBudget {
				return nil
			}
			if err := write(ctx, worker, i); err != nil {
				return err
			}
			done.Add(1)
			return nil
		})
		if err != nil {
			return fmt.Errorf("floor of %s: %w", kind, err)
		}
		out = append(out, floor{Round: round, Kind: kind, Concurrency: len(perWorker), Sampled: int(done.Load()), Required: required,
			WritesPerS: float64(done.Load()) / time.Since(start).Seconds()})
		return nil
	}
	var ignored atomic.Int64
	agentOf := func(worker int) *agentWriter { return &agentWriter{c: r.agents[worker], conflicts: &ignored} }
	created := func(i int) bool { return endpoints[i] != nil }

	// Writer w of the floor is the agent of node w, and writes only its node's endpoints.
	if err := measure(kindEndpointCreate, byNode(indexes(len(endpoints), nil), agents), e, func(ctx context.Context, worker, i int) error {
		var err error
		endpoints[i], err = agentOf(worker).create(ctx, pods[i])
		return err
	}); err != nil {
		return nil, err
	}
	if err := measure(kindEndpointStatus, byNode(indexes(len(endpoints), created), agents), 2*e, func(ctx context.Context, worker, i int) error {
		var err error
		endpoints[i], err = agentOf(worker).markRegistered(ctx, endpoints[i])
		return err
	}); err != nil {
		return nil, err
	}
	if err := measure(kindEndpointVerified, spread(indexes(len(endpoints), created), workers), e, func(ctx context.Context, _, i int) error {
		return verify(ctx, r.managerClient, endpoints[i], pods[i])
	}); err != nil {
		return nil, err
	}

	services := make([]*meshv1alpha1.MeshService, min(n, floorSample))
	generated := make([]*corev1.Service, len(services))
	if err := measure(kindServiceCreate, spread(indexes(len(services), nil), workers), n, func(ctx context.Context, _, i int) error {
		ms := &meshv1alpha1.MeshService{ObjectMeta: metav1.ObjectMeta{Namespace: floorNamespace, Name: fmt.Sprintf("floor-svc-%04d", i),
			Annotations: map[string]string{controller.AnnotationServiceAccountUID: string(uuid.NewUUID())}}}
		if err := r.managerClient.Create(ctx, ms); err != nil {
			return err
		}
		services[i] = ms
		return nil
	}); err != nil {
		return nil, err
	}
	// The status and Service of a service of size.endpoints healthy endpoints, as Translate
	// derives them, from the floor's created endpoints (reused: nothing cross-checks here).
	var pool []meshv1alpha1.MeshEndpoint
	for _, ep := range endpoints {
		if ep != nil {
			pool = append(pool, *ep)
		}
	}
	members := func(i int) []meshv1alpha1.MeshEndpoint {
		out := make([]meshv1alpha1.MeshEndpoint, 0, r.size.endpoints)
		for j := range min(r.size.endpoints, len(pool)) {
			member := *pool[(i*r.size.endpoints+j)%len(pool)].DeepCopy()
			member.Spec.ServiceName = services[i].Name
			member.Status.Health = meshv1alpha1.HealthHealthy
			out = append(out, member)
		}
		return out
	}
	madeService := func(i int) bool { return services[i] != nil }
	if err := measure(kindGeneratedService, spread(indexes(len(services), madeService), workers), n, func(ctx context.Context, _, i int) error {
		translated, err := translate(services[i], members(i), "")
		if err != nil {
			return err
		}
		want, err := meshservice.ServiceToWrite(nil, translated.Service)
		if err != nil {
			return err
		}
		if err := r.managerClient.Create(ctx, want, client.FieldOwner(controller.FieldManager)); err != nil {
			return err
		}
		generated[i] = want
		return nil
	}); err != nil {
		return nil, err
	}
	madeBoth := func(i int) bool { return services[i] != nil && generated[i] != nil }
	if err := measure(kindServiceStatus, spread(indexes(len(services), madeBoth), workers), n, func(ctx context.Context, _, i int) error {
		translated, err := translate(services[i], members(i), generated[i].Spec.ClusterIP)
		if err != nil {
			return err
		}
		ms := services[i]
		translated.Status.VIP = generated[i].Spec.ClusterIP
		ms.Status = controller.StampStatus(ms.Status, translated.Status, ms.Generation, metav1.NewTime(time.Now().Truncate(time.Second)))
		return r.managerClient.Status().Update(ctx, ms)
	}); err != nil {
		return nil, err
	}
	return out, nil
}

// warmUp makes one write through every client first, outside any timing: a client's first
// request pays for discovery and its connection, which a long-running agent or manager does not.
func (r *run) warmUp(ctx context.Context, agents int) error {
	var ignored atomic.Int64
	perAgent := make([][]int, agents)
	for w := range perAgent {
		perAgent[w] = []int{w}
	}
	if err := parallel(ctx, perAgent, func(ctx context.Context, w, _ int) error {
		pod := podFor(&endpoint{key: types.NamespacedName{Namespace: floorNamespace, Name: fmt.Sprintf("warm-up-%02d", w)},
			svc: "warm-up", writer: w})
		pod.UID = uuid.NewUUID()
		pod.Status.PodIP = r.work.newIP()
		_, err := (&agentWriter{c: r.agents[w], conflicts: &ignored}).create(ctx, pod)
		return err
	}); err != nil {
		return fmt.Errorf("warming the agents' clients up: %w", err)
	}
	if err := r.managerClient.Create(ctx, &meshv1alpha1.MeshService{ObjectMeta: metav1.ObjectMeta{Namespace: floorNamespace, Name: "warm-up"}}); err != nil {
		return fmt.Errorf("warming the manager's client up: %w", err)
	}
	return nil
}

// translate is the controller's derivation of a service's status and Service.
func translate(ms *meshv1alpha1.MeshService, endpoints []meshv1alpha1.MeshEndpoint, clusterIP string) (meshservice.Output, error) {
	return meshservice.Translate(meshservice.Input{Namespace: ms.Namespace, Name: ms.Name, UID: ms.UID, MeshDomain: resolve.DefaultMeshDomain,
		Endpoints: endpoints, Service: meshservice.ServiceFacts{Exists: clusterIP != "", Owned: true, ClusterIP: clusterIP}})
}

// verify writes the controller's Verified condition on ep as its recordVerdict does: a merge
// patch of the status with an optimistic lock.
func verify(ctx context.Context, c client.Client, ep *meshv1alpha1.MeshEndpoint, pod *corev1.Pod) error {
	verdict := registration.Verify(ep, pod)
	if verdict.Status != metav1.ConditionTrue {
		return fmt.Errorf("the floor's endpoint %s does not verify against its pod: %s", ep.Name, verdict.Message)
	}
	patch := client.MergeFromWithOptions(ep.DeepCopy(), client.MergeFromWithOptimisticLock{})
	updated := ep.DeepCopy()
	updated.Status.Conditions = conditions.Set(ep.Status.Conditions, verdict, ep.Generation, metav1.NewTime(time.Now().Truncate(time.Second)))
	return c.Status().Patch(ctx, updated, patch)
}

// clearFloor deletes the floor's objects (floors leaves them), so the manager never sees them.
func (r *run) clearFloor(ctx context.Context) error {
	for _, obj := range []client.Object{&meshv1alpha1.MeshEndpoint{}, &meshv1alpha1.MeshService{}} {
		if err := r.env.Client.DeleteAllOf(ctx, obj, client.InNamespace(floorNamespace)); err != nil {
			return fmt.Errorf("clearing the floor's %T: %w", obj, err)
		}
	}
	var services corev1.ServiceList
	if err := r.env.Client.List(ctx, &services, client.InNamespace(floorNamespace)); err != nil {
		return err
	}
	return parallel(ctx, spread(services.Items, 16), func(ctx context.Context, _ int, svc corev1.Service) error {
		return client.IgnoreNotFound(r.env.Client.Delete(ctx, &svc))
	})
}

// indexes lists 0 … n-1, those keep accepts when it is not nil.
func indexes(n int, keep func(int) bool) []int {
	var out []int
	for i := range n {
		if keep == nil || keep(i) {
			out = append(out, i)
		}
	}
	return out
}

// byNode puts floor endpoint i with writer i mod agents, the agent of its node.
func byNode(items []int, agents int) [][]int {
	out := make([][]int, agents)
	for _, i := range items {
		out[i%agents] = append(out[i%agents], i)
	}
	return out
}
