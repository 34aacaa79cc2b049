// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

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
		servers, err := serveSampleApp(ip, deploy.Spec.Template.Annotations["endpoint.aether.io/health-path"])
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

// serveSampleApp listens on ip like the payments app: HTTP/1.1 on 8080, h2c on 9090, TCP echo
// on 9000.
func serveSampleApp(ip, healthPath string) ([]io.Closer, error) {
	var closers []io.Closer
	mux := http.NewServeMux()
	mux.HandleFunc(healthPath, func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		_, _ = fmt.Fprintf(w, "payments at %s, %s\n", ip, r.Proto)
	})
	for _, s := range []struct {
		port string
		h2c  bool
	}{{"8080", false}, {"9090", true}} {
		l, err := net.Listen("tcp", net.JoinHostPort(ip, s.port))
		if err != nil {
			return closers, err
		}
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		if s.h2c {
			srv.Protocols = new(http.Protocols)
			srv.Protocols.SetUnencryptedHTTP2(true)
		}
		closers = append(closers, srv)
		go func() { _ = srv.Serve(l) }()
	}
	echo, err := net.Listen("tcp", net.JoinHostPort(ip, "9000"))
	if err != nil {
		return closers, err
	}
	closers = append(closers, echo)
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(time.Minute))
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return closers, nil
}
