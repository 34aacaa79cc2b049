// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package v1alpha1_test

import (
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/testenv"
)

// columns splits kubectl's table output into rows of cells, cutting each line where the header's
// columns start, so an empty cell stays an empty cell.
func columns(out string) [][]string {
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	var starts []int
	for _, loc := range regexp.MustCompile(`\S+`).FindAllStringIndex(lines[0], -1) {
		starts = append(starts, loc[0])
	}
	var rows [][]string
	for _, line := range lines {
		row := make([]string, len(starts))
		for i, start := range starts {
			end := len(line)
			if i+1 < len(starts) {
				end = min(starts[i+1], len(line))
			}
			if start < len(line) {
				row[i] = strings.TrimSpace(line[start:end])
			}
		}
		rows = append(rows, row)
	}
	return rows
}

// TestKubectlGetMeshEndpoints runs the real kubectl against the API server and reads the
// designed columns: SERVICE, ADDRESS, PORTS, HEALTH, NODE, AGE.
func TestKubectlGetMeshEndpoints(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t, ctx)
	ep := validEndpoint(ns, "payments-0")
	if err := env.Client.Create(ctx, ep); err != nil {
		t.Fatal(err)
	}
	ep.Status.Health = meshv1alpha1.HealthHealthy
	if err := env.Client.Status().Update(ctx, ep); err != nil {
		t.Fatal(err)
	}

	for _, resource := range []string{"meshendpoints", "meshep"} {
		out, stderr, err := env.Kubectl(ctx, "get", resource, "-n", ns)
		if err != nil {
			t.Fatalf("kubectl get %s: %v\n%s", resource, err, stderr)
		}
		rows := columns(out)
		wantHeader := []string{"NAME", "SERVICE", "ADDRESS", "PORTS", "HEALTH", "NODE", "AGE"}
		if len(rows) != 2 || strings.Join(rows[0], " ") != strings.Join(wantHeader, " ") {
			t.Fatalf("kubectl get %s printed:\n%s\nwant the header %v and one row", resource, out, wantHeader)
		}
		want := []string{"payments-0", "payments", "10.244.0.11", "8080/HTTP,9000/TCP,9090/HTTP2", "Healthy", "node-a"}
		if got := rows[1][:len(want)]; !slices.Equal(got, want) {
			t.Errorf("kubectl get %s row = %v, want %v", resource, got, want)
		}
	}
}

// TestKubectlGetMeshServices reads the designed columns HTTP, TCP, PORTS, ENDPOINTS, VIP,
// READY, AGE. HTTP is what a portless http:// reaches: 80 when declared HTTP-class, else empty
// (payments serves HTTP on 8080, not 80); a service with no TCP port shows an empty TCP cell.
func TestKubectlGetMeshServices(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t, ctx)
	for name, mutate := range map[string]func(*meshv1alpha1.MeshServiceStatus){
		"payments": func(*meshv1alpha1.MeshServiceStatus) {},
		"web": func(s *meshv1alpha1.MeshServiceStatus) {
			s.Ports = []meshv1alpha1.ServicePort{{Port: 80, Protocol: meshv1alpha1.ProtocolHTTP, Endpoints: 2}}
			s.PortsSummary = "80/HTTP"
			s.DefaultHTTPPort = ptr.To[int32](80)
			s.DefaultTCPPort = nil
			s.VIP = "10.96.0.11"
			s.Endpoints = meshv1alpha1.EndpointCounts{Ready: 0, Total: 2}
			s.EndpointsSummary = "0/2"
			s.Conditions[0].Status = metav1.ConditionFalse
			s.Conditions[0].Reason = meshv1alpha1.ServiceReasonNoReadyEndpoints
		},
	} {
		ms := &meshv1alpha1.MeshService{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		if err := env.Client.Create(ctx, ms); err != nil {
			t.Fatal(err)
		}
		ms.Status = mixedServiceStatus()
		mutate(&ms.Status)
		if err := env.Client.Status().Update(ctx, ms); err != nil {
			t.Fatal(err)
		}
	}

	for _, resource := range []string{"meshservices", "meshsvc"} {
		out, stderr, err := env.Kubectl(ctx, "get", resource, "-n", ns)
		if err != nil {
			t.Fatalf("kubectl get %s: %v\n%s", resource, err, stderr)
		}
		rows := columns(out)
		want := [][]string{
			{"NAME", "HTTP", "TCP", "PORTS", "ENDPOINTS", "VIP", "READY", "AGE"},
			{"payments", "", "9000", "8080/HTTP,9000/TCP,9090/HTTP2", "3/3", "10.96.0.10", "True"},
			{"web", "80", "", "80/HTTP", "0/2", "10.96.0.11", "False"},
		}
		if len(rows) != len(want) {
			t.Fatalf("kubectl get %s printed:\n%s\nwant %d lines", resource, out, len(want))
		}
		for i, w := range want {
			if got := rows[i][:len(w)]; !slices.Equal(got, w) {
				t.Errorf("kubectl get %s line %d = %v, want %v", resource, i, got, w)
			}
		}
	}
}

// TestSamplesApply applies config/samples with the real kubectl: the samples are valid against
// the CRDs, and what the agent would write for them is what kubectl shows.
func TestSamplesApply(t *testing.T) {
	ctx := testContext(t)
	out, stderr, err := env.Kubectl(ctx, "apply", "-k", filepath.Join(testenv.RepoRoot(), "config", "samples"))
	if err != nil {
		t.Fatalf("kubectl apply -k config/samples: %v\n%s%s", err, out, stderr)
	}
	endpoints := filepath.Join(testenv.RepoRoot(), "config", "samples", "payments_meshendpoints.yaml")
	if out, stderr, err = env.Kubectl(ctx, "apply", "-f", endpoints); err != nil {
		t.Fatalf("kubectl apply -f %s: %v\n%s%s", endpoints, err, out, stderr)
	}
	out, stderr, err = env.Kubectl(ctx, "get", "meshendpoints", "-n", "shop")
	if err != nil {
		t.Fatalf("kubectl get meshendpoints: %v\n%s", err, stderr)
	}
	if n := len(regexp.MustCompile(`(?m)^payments-\S+\s+payments\s+\S+\s+8080/HTTP,9000/TCP,9090/HTTP2\s`).FindAllString(out, -1)); n != 3 {
		t.Errorf("want the three sample payments endpoints with ports 8080/HTTP,9000/TCP,9090/HTTP2, found %d in:\n%s", n, out)
	}
}
