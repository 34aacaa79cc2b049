// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package webhook

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aether-mesh/aether-operator/internal/portspec"
)

// maxDenial is the most bytes a denial the API server returns may take, whatever the pod carries.
const maxDenial = 4 * 1024

// apiServerAnnotationLimit is the API server's limit on a pod's annotations, keys included.
const apiServerAnnotationLimit = 256 << 10

// hostileValue builds a value of n bytes by repeating unit.
func hostileValue(unit string, n int) string {
	return strings.Repeat(unit, n/len(unit)+1)[:n]
}

// TestHostileAnnotationsDeniedBounded: a managed pod whose annotations are large and wrong — up
// to the 256 KiB the API server allows — is denied by the webhook (not admitted by the API
// server's timeout under failurePolicy Ignore), with a denial under maxDenial that names the
// annotation and, over the annotation's cap, the cap.
func TestHostileAnnotationsDeniedBounded(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t, ctx)
	shapes := map[string]struct {
		key, unit string
		limit     int
	}{
		"ports of commas":        {portspec.AnnotationPorts, ",", portspec.MaxPortsLength},
		"ports of bad suffixes":  {portspec.AnnotationPorts, "9000=tpc,", portspec.MaxPortsLength},
		"upstreams of bad names": {portspec.AnnotationUpstreams, "Payments,", portspec.MaxUpstreamsLength},
		"a health path":          {portspec.AnnotationHealthPath, "p/", portspec.MaxHealthPath},
		"a metadata value":       {portspec.AnnotationMetadataPrefix + "blob", "v", portspec.MaxMetadataValue},
		"an unknown annotation":  {"endpoint.aether.io/prots", ",", 0},
	}
	sizes := map[string]int{"1KiB": 1 << 10, "64KiB": 64 << 10, "256KiB": apiServerAnnotationLimit}
	for name, shape := range shapes {
		for sizeName, size := range sizes {
			t.Run(name+" "+sizeName, func(t *testing.T) {
				size := min(size, apiServerAnnotationLimit-len(shape.key))
				value := hostileValue(shape.unit, size)
				err := env.Client.Create(ctx, pod(ns, true, map[string]string{shape.key: value}))
				checkHostileDenial(t, err, shape.key, size, shape.limit)
			})
		}
	}
}

// checkHostileDenial fails t unless err is the webhook's denial, under maxDenial, naming key
// and, when size is over a cap (limit > 0), the size and the cap.
func checkHostileDenial(t *testing.T, err error, key string, size, limit int) {
	t.Helper()
	if err == nil {
		t.Fatal("admitted, want a denial")
	}
	msg := err.Error()
	if len(msg) >= maxDenial {
		t.Fatalf("the denial is %d bytes, want under %d: %.512s…", len(msg), maxDenial, msg)
	}
	if !strings.Contains(msg, denied+key+`: "`) {
		t.Errorf("the denial does not come from the webhook naming %s: %s", key, msg)
	}
	if limit > 0 && size > limit {
		want := fmt.Sprintf("the value is %d bytes long, over the cap of %d bytes", size, limit)
		if key == portspec.AnnotationMetadataPrefix+"blob" {
			want = fmt.Sprintf("metadata value is %d bytes long (shorten it to at most %d bytes)", size, limit)
		}
		if !strings.Contains(msg, want) {
			t.Errorf("the denial lacks %q: %s", want, msg)
		}
	}
}

// TestKubectlCreateOf256KiBAnnotation: what a user sees at `kubectl create -f` of a pod whose
// endpoint.aether.io/ports is as large as the API server allows: a short denial naming the
// annotation, its length, the cap and the fix.
func TestKubectlCreateOf256KiBAnnotation(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t, ctx)
	size := apiServerAnnotationLimit - len(portspec.AnnotationPorts)
	manifest := filepath.Join(t.TempDir(), "pod.yaml")
	if err := os.WriteFile(manifest, []byte(`apiVersion: v1
kind: Pod
metadata:
  name: hostile
  namespace: `+ns+`
  labels: {aether.io/managed: "true"}
  annotations:
    endpoint.aether.io/ports: "`+strings.Repeat(",", size)+`"
spec:
  serviceAccountName: app
  containers: [{name: app, image: registry.example/app:1}]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	out, stderr, err := env.Kubectl(ctx, "create", "-f", manifest)
	if err == nil {
		t.Fatalf("kubectl create of a 256 KiB ports annotation succeeded:\n%s", out)
	}
	if len(stderr) >= maxDenial {
		t.Errorf("kubectl printed %d bytes, want under %d", len(stderr), maxDenial)
	}
	want := fmt.Sprintf(`admission webhook "vpod.mesh.aether.io" denied the request: endpoint.aether.io/ports: "%s…": `+
		`the value is %d bytes long, over the cap of 4096 bytes, and is not parsed `+
		`(shorten it to at most 4096 bytes: list the ports served, for example "8080,9090=h2,9000=tcp")`, strings.Repeat(",", portspec.MaxQuoted), size)
	if !strings.Contains(stderr, want) {
		t.Errorf("kubectl's stderr lacks\n%s\n%s", want, stderr)
	}
}

// TestJudgeDeadline: judge returns parse's answer when it comes in time, and a denial that says
// the pod could not be judged in time — never an admission — when it does not, or when the
// request's context ends first. (A unit test of the one function, with a parse that blocks on a
// channel: a real parse of the largest pod takes milliseconds.)
func TestJudgeDeadline(t *testing.T) {
	parseErr := errors.New("parsed: bad")
	if err := judge(context.Background(), time.Minute, func() error { return parseErr }); err != parseErr {
		t.Errorf("a parse in time: got %v, want its error", err)
	}
	if err := judge(context.Background(), time.Minute, func() error { return nil }); err != nil {
		t.Errorf("a valid parse in time: got %v, want nil", err)
	}

	release := make(chan struct{})
	defer close(release)
	blocked := func() error { <-release; return nil }
	err := judgeOrHang(t, context.Background(), time.Millisecond, blocked)
	want := "the pod's mesh annotations could not be judged within 1ms, so the pod is denied rather than admitted unchecked " +
		"(keep each mesh annotation within its length cap, for example 4096 bytes for endpoint.aether.io/ports, and apply again)"
	if err == nil || err.Error() != want {
		t.Errorf("a parse past the deadline: got %v\nwant %s", err, want)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := judgeOrHang(t, ctx, time.Minute, blocked); err == nil || !strings.Contains(err.Error(), "could not be judged") {
		t.Errorf("a request ended before the parse: got %v, want the deadline denial", err)
	}
}

// judgeOrHang runs judge, failing t if it has not returned after 30 s: with a parse that never
// ends, a judge without a deadline would hang the suite instead of failing this test. (A liveness
// guard, as testenv.Eventually's, not a measurement.)
func judgeOrHang(t *testing.T, ctx context.Context, deadline time.Duration, parse func() error) error {
	t.Helper()
	result := make(chan error, 1)
	go func() { result <- judge(ctx, deadline, parse) }()
	select {
	case err := <-result:
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("judge has not returned after 30s: a parse that never ends holds the request")
		return nil
	}
}
