// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/aether-mesh/aether-operator/hack/testapp"
	"github.com/aether-mesh/aether-operator/internal/agent"
	"github.com/aether-mesh/aether-operator/internal/testenv"
)

// localNode is the node the local agent serves.
const localNode = "node-a"

// startSampleWorkload stands in for a kubelet and the sample app: it creates node-a, creates the
// sample Deployment's pods bound to node-a with loopback addresses as their IPs (no network but
// loopback is touched), and serves on each address what the app would — HTTP on 8080 (with its
// health path), h2c on 9090 and a TCP echo on 9000 — so the agent's health probes are real.
// It returns a function that closes the listeners.
func startSampleWorkload(ctx context.Context, env *testenv.Env) (func(), error) {
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "samples", "payments_deployment.yaml"))
	if err != nil {
		return nil, err
	}
	deploy := &appsv1.Deployment{}
	if err := yaml.Unmarshal(raw, deploy); err != nil {
		return nil, err
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: localNode, Labels: map[string]string{
		agent.LabelRegion: "local", agent.LabelZone: "local-a",
	}}}
	if err := env.Client.Create(ctx, node); err != nil {
		return nil, fmt.Errorf("creating node %s: %w", localNode, err)
	}

	var closers []io.Closer
	closeAll := func() {
		for _, c := range closers {
			_ = c.Close()
		}
	}
	for i := range int(*deploy.Spec.Replicas) {
		ip := fmt.Sprintf("127.0.0.%d", 11+i)
		servers, err := testapp.Serve(ip, testapp.Ports{HTTP: []int{8080}, H2C: []int{9090}, TCP: []int{9000},
			HealthPath: deploy.Spec.Template.Annotations["endpoint.aether.io/health-path"]})
		closers = append(closers, servers...)
		if err != nil {
			closeAll()
			return nil, err
		}
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: deploy.Namespace, Name: deploy.Name + "-" + strconv.Itoa(i),
				Labels: deploy.Spec.Template.Labels, Annotations: deploy.Spec.Template.Annotations,
			},
			Spec: *deploy.Spec.Template.Spec.DeepCopy(),
		}
		pod.Spec.NodeName = localNode
		if err := env.Client.Create(ctx, pod); err != nil {
			closeAll()
			return nil, fmt.Errorf("creating pod %s: %w", pod.Name, err)
		}
		pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}}
		if err := env.Client.Status().Update(ctx, pod); err != nil {
			closeAll()
			return nil, fmt.Errorf("setting pod %s's IP: %w", pod.Name, err)
		}
	}
	return closeAll, nil
}
