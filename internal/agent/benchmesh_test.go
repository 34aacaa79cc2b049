// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/conditions"
	"github.com/aether-mesh/aether-operator/internal/meshservice"
	"github.com/aether-mesh/aether-operator/internal/portspec"
	"github.com/aether-mesh/aether-operator/internal/registration"
	"github.com/aether-mesh/aether-operator/internal/testenv"
)

// The view benchmarks' mesh: 1 000 MeshServices × 10 MeshEndpoints, in a real API server of its
// own, started and filled once per test binary (make bench's -count runs share it) and stopped
// by TestMain. Its own, because the package's API server runs the MeshService controller, which
// would delete MeshServices with no pod behind their endpoints, and because a cluster-wide view
// there would also count other tests' objects.
//
// Every object is what the real writers write for a real pod, computed by the same code: each
// endpoint's spec by registration.Registration from a managed pod (three ports, two metadata
// keys, a locality), its Registered condition as the agent writes it and its Verified verdict by
// registration.Verify against that pod; each MeshService's status by meshservice.Translate over
// its ten endpoints (ports, dial surface, conditions), with a VIP. The pods themselves are not
// stored: nothing reads them, and no agent serves their nodes.
const (
	benchServices          = 1000
	benchEndpointsPerSvc   = 10
	benchCreateConcurrency = 16
	benchMeshDomain        = "aether.internal"
)

var benchMesh struct {
	once sync.Once
	env  *testenv.Env
	err  error
}

// benchMeshEnv is the benchmarks' API server, holding the mesh; the first call starts and fills it.
func benchMeshEnv(ctx context.Context) (*testenv.Env, error) {
	benchMesh.once.Do(func() {
		if benchMesh.env, benchMesh.err = testenv.Start(); benchMesh.err != nil {
			return
		}
		start := time.Now()
		benchMesh.err = populateBenchMesh(ctx, benchMesh.env)
		fmt.Printf("bench mesh: %d MeshServices × %d MeshEndpoints written in %s\n", benchServices, benchEndpointsPerSvc,
			time.Since(start).Round(time.Millisecond))
	})
	return benchMesh.env, benchMesh.err
}

// stopBenchMesh is a TestMain start: its stop stops the benchmarks' API server, if one started.
func stopBenchMesh(*testenv.Env) (func(), error) {
	return func() {
		if benchMesh.env != nil {
			if err := benchMesh.env.Stop(); err != nil {
				fmt.Printf("stopping the benchmarks' API server: %v\n", err)
			}
		}
	}, nil
}

// populateBenchMesh writes the mesh, benchCreateConcurrency services at a time.
func populateBenchMesh(ctx context.Context, e *testenv.Env) error {
	ns, err := e.Namespace(ctx, "bench-mesh")
	if err != nil {
		return err
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, benchCreateConcurrency)
	for range benchCreateConcurrency {
		wg.Go(func() {
			for s := int(next.Add(1)) - 1; s < benchServices; s = int(next.Add(1)) - 1 {
				if err := writeBenchService(ctx, e.Client, ns, s); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	var all error
	for err := range errs {
		all = errors.Join(all, err)
	}
	return all
}

// writeBenchService writes service s's endpoints, then the MeshService with the status the
// controller derives from them.
func writeBenchService(ctx context.Context, c client.Client, ns string, s int) error {
	name := fmt.Sprintf("svc-%04d", s)
	endpoints := make([]meshv1alpha1.MeshEndpoint, 0, benchEndpointsPerSvc)
	for j := range benchEndpointsPerSvc {
		ep, err := writeBenchEndpoint(ctx, c, ns, name, s*benchEndpointsPerSvc+j)
		if err != nil {
			return err
		}
		endpoints = append(endpoints, *ep)
	}
	ms := &meshv1alpha1.MeshService{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if err := c.Create(ctx, ms); err != nil {
		return fmt.Errorf("creating MeshService %s: %w", name, err)
	}
	vip := fmt.Sprintf("10.96.%d.%d", s/250, s%250+2)
	out, err := meshservice.Translate(meshservice.Input{Namespace: ns, Name: name, UID: ms.UID, MeshDomain: benchMeshDomain,
		Endpoints: endpoints, Service: meshservice.ServiceFacts{Exists: true, Owned: true, ClusterIP: vip}})
	if err != nil {
		return fmt.Errorf("translating MeshService %s: %w", name, err)
	}
	// Stamped as the controller's writeStatus does.
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	status := out.Status
	status.VIP, status.ObservedGeneration = vip, ms.Generation
	status.Conditions = conditions.Merge(nil, status.Conditions, ms.Generation, now)
	for i := range status.Ports {
		status.Ports[i].Conditions = conditions.Merge(nil, status.Ports[i].Conditions, ms.Generation, now)
	}
	ms.Status = status
	if err := c.Status().Update(ctx, ms); err != nil {
		return fmt.Errorf("status of MeshService %s: %w", name, err)
	}
	return nil
}

// benchPod is the managed pod behind endpoint i of service, and its node (for the locality).
func benchPod(ns, service string, i int) (*corev1.Pod, *corev1.Node) {
	ip := fmt.Sprintf("10.%d.%d.%d", 1+i/65536, i/256%256, i%256)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s-%d", service, i%benchEndpointsPerSvc),
			UID:    types.UID(fmt.Sprintf("0000%04d-0000-0000-0000-%012d", i%7919, i)),
			Labels: map[string]string{portspec.LabelManaged: portspec.ManagedValue},
			Annotations: map[string]string{
				portspec.AnnotationPort: "8080", portspec.AnnotationPorts: "8080=h1,9000=tcp,9090=grpc",
				portspec.AnnotationHealthPath:                 "/healthz",
				portspec.AnnotationMetadataPrefix + "version": "v2", portspec.AnnotationMetadataPrefix + "track": "stable",
			}},
		Spec:   corev1.PodSpec{NodeName: fmt.Sprintf("bench-node-%d", i%50), ServiceAccountName: service},
		Status: corev1.PodStatus{PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}},
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: pod.Spec.NodeName, Labels: map[string]string{
		LabelRegion: "eu-west-1", LabelZone: fmt.Sprintf("eu-west-1%c", 'a'+rune(i%50%3)),
	}}}
	return pod, node
}

// writeBenchEndpoint writes endpoint i of service as the agent registers it (spec, then status
// with Healthy and Registered) with the controller's Verified verdict.
func writeBenchEndpoint(ctx context.Context, c client.Client, ns, service string, i int) (*meshv1alpha1.MeshEndpoint, error) {
	pod, node := benchPod(ns, service, i)
	spec, err := registration.Registration(pod, node)
	if err != nil {
		return nil, fmt.Errorf("registering pod %s: %w", pod.Name, err)
	}
	ep := &meshv1alpha1.MeshEndpoint{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pod.Name}, Spec: spec}
	if err := c.Create(ctx, ep, client.FieldOwner(FieldManager)); err != nil {
		return nil, fmt.Errorf("creating MeshEndpoint %s: %w", ep.Name, err)
	}
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	ep.Status = meshv1alpha1.MeshEndpointStatus{Health: meshv1alpha1.HealthHealthy, ObservedGeneration: ep.Generation,
		Conditions: conditions.Merge(nil, []metav1.Condition{
			{Type: meshv1alpha1.EndpointConditionRegistered, Status: metav1.ConditionTrue, Reason: meshv1alpha1.EndpointReasonRegistered,
				Message: "the MeshEndpoint matches the pod's annotations"},
			registration.Verify(ep, pod),
		}, ep.Generation, now)}
	if err := c.Status().Update(ctx, ep, client.FieldOwner(FieldManager)); err != nil {
		return nil, fmt.Errorf("status of MeshEndpoint %s: %w", ep.Name, err)
	}
	return ep, nil
}
