// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestReadAudit reads audit.k8s.io/v1 events as the API server writes them (one JSON object a
// line): a request counts once, at ResponseComplete; the manager is told by its user, an agent by
// the user it impersonates, the agent process by its own user; a write by anyone else is another writer's.
func TestReadAudit(t *testing.T) {
	lines := `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"1","stage":"ResponseComplete","requestURI":"/apis/mesh.aether.io/v1alpha1/namespaces/bench-00/meshendpoints/svc-0000-00/status","verb":"patch","user":{"username":"aether-manager","groups":["system:authenticated"]},"objectRef":{"resource":"meshendpoints","namespace":"bench-00","name":"svc-0000-00","apiGroup":"mesh.aether.io","apiVersion":"v1alpha1","subresource":"status"},"responseStatus":{"metadata":{},"code":409},"requestReceivedTimestamp":"2026-11-30T10:00:01.000001Z","stageTimestamp":"2026-11-30T10:00:01.010000Z"}
{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"2","stage":"ResponseComplete","verb":"create","user":{"username":"aether-admin","groups":["system:masters"]},"impersonatedUser":{"username":"system:serviceaccount:aether-operator-system:aether-operator-agent"},"objectRef":{"resource":"meshendpoints","namespace":"bench-00","name":"svc-0000-01","apiGroup":"mesh.aether.io"},"responseStatus":{"metadata":{},"code":201},"requestReceivedTimestamp":"2026-11-30T10:00:02Z"}
{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"3","stage":"ResponseStarted","verb":"watch","user":{"username":"aether-manager"},"objectRef":{"resource":"pods"},"requestReceivedTimestamp":"2026-11-30T10:00:03Z"}
{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"4","stage":"ResponseComplete","verb":"update","user":{"username":"tenant"},"objectRef":{"resource":"services","namespace":"bench-00","name":"svc-0000"},"responseStatus":{"metadata":{},"code":200},"requestReceivedTimestamp":"2026-11-30T10:00:04Z"}
{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"6","stage":"ResponseComplete","verb":"patch","user":{"username":"aether-bench-agent","groups":["system:masters"]},"impersonatedUser":{"username":"system:serviceaccount:aether-operator-system:aether-operator-agent"},"objectRef":{"resource":"meshendpoints","namespace":"bench-00","name":"svc-0000-a000","apiGroup":"mesh.aether.io","subresource":"status"},"responseStatus":{"metadata":{},"code":200},"requestReceivedTimestamp":"2026-11-30T10:00:06Z"}
{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"5","stage":"ResponseComplete","verb":"list","user":{"username":"aether-manager"},"objectRef":{"resource":"meshservices","apiGroup":"mesh.aether.io"},"responseStatus":{"metadata":{},"code":200},"requestReceivedTimestamp":"2026-11-30T10:00:05Z"}
`
	path := filepath.Join(t.TempDir(), "audit.log")
	if err := os.WriteFile(path, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	reqs, err := readAudit(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(reqs) != 5 {
		t.Fatalf("%d requests, want 5 (the ResponseStarted stage is not one): %+v", len(reqs), reqs)
	}
	at := func(s string) time.Time { v, _ := time.Parse(time.RFC3339, s); return v }
	all := window(reqs, at("2026-11-30T10:00:00Z"), at("2026-11-30T10:01:00Z"))
	if got := writesOf(all, byManager); got.total() != 1 || got["patch meshendpoints/status 409"] != 1 {
		t.Errorf("manager's writes %v, want the one patch of meshendpoints/status answered 409", got)
	}
	if got := readsOf(all, byManager); got["list meshservices"] != 1 || got.total() != 1 {
		t.Errorf("manager's reads %v, want one list of meshservices", got)
	}
	if got := writesOf(all, byAgent); got["create meshendpoints 201"] != 1 || got.total() != 1 {
		t.Errorf("agents' writes %v, want the impersonated create", got)
	}
	// The agent process impersonates the agent too, but is told by the user it authenticates as.
	if got := writesOf(all, byAgentProcess); got["patch meshendpoints/status 200"] != 1 || got.total() != 1 {
		t.Errorf("the agent process's writes %v, want its one status patch", got)
	}
	if got := othersWrites(all); got["tenant update services"] != 1 || got.total() != 1 {
		t.Errorf("others' writes %v, want the tenant's update of a Service", got)
	}
	if got := window(reqs, at("2026-11-30T10:00:02Z"), at("2026-11-30T10:00:04Z")); len(got) != 1 {
		t.Errorf("[10:00:02, 10:00:04) holds %d requests, want the agent's create alone", len(got))
	}
}

// TestParseSizes reads BENCH_SIZES and refuses what is not <services>x<endpoints>.
func TestParseSizes(t *testing.T) {
	got, err := parseSizes("100x10, 1000x10")
	if err != nil || len(got) != 2 || got[0] != (size{100, 10}) || got[1] != (size{1000, 10}) {
		t.Errorf("parseSizes(100x10, 1000x10) = %v, %v", got, err)
	}
	for _, bad := range []string{"100", "100x", "x10", "0x10", "100x0", "ax10", ""} {
		if _, err := parseSizes(bad); err == nil {
			t.Errorf("parseSizes(%q) accepted", bad)
		}
	}
}
