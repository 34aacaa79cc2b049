// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package envoy_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/aether-mesh/aether-operator/hack/testapp"
	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/xds"
	"github.com/aether-mesh/aether-operator/internal/xds/xdstest"
)

// The drain tail as the node's Envoy lives it. The live tier runs no agent (no API server): it
// publishes what the agent would, when it would. At a client pod's CNI DEL the runtime removes
// the sandbox's namespace (its bind mount: a lazy unmount, as runtimes do; the pod's interface
// stays, which no test of this tier could do without) and the agent either withdraws the pod's
// listeners at once (no tail: the next rebuild's configuration, without the pod) or keeps them
// until the tail's end (internal/agent's TestCNIDrainTail proves that the agent publishes so).
const (
	// drainTailEnvoyDrain is the node Envoy's --drain-time-s here (config/envoy: 20 s, gradual):
	// how long a withdrawn listener's connections go on before Envoy closes them.
	drainTailEnvoyDrain = time.Second
	// slowLines lines one slowEvery apart: a response that outlives the drain time well.
	slowLines = 12
	slowEvery = 400 * time.Millisecond
)

// TestADeletedPodsDrainTailLetsALongResponseFinish: a long response (testapp's slow path,
// slowLines lines slowEvery apart) to a client pod through its capture listener, in flight when
// the pod's sandbox is deleted. With the drain tail its listeners stay while it runs: the
// response finishes whole, long after the Envoy's drain time, and the listeners go at the tail's
// end. Without (the negative control: the listeners withdrawn at DEL, as the agent did before the
// tail) Envoy drains them and, at the drain time's end, cuts the response.
func TestADeletedPodsDrainTailLetsALongResponseFinish(t *testing.T) {
	for _, tc := range []struct {
		name string
		tail bool
	}{{"drain tail", true}, {"no tail", false}} {
		t.Run(tc.name, func(t *testing.T) {
			// pure-http on this node alone: frontend-0 calls payments (HTTP 8080), whose pod here
			// answers; one Envoy.
			s := xdstest.Scenarios()["pure-http"]
			s.Workloads = slices.DeleteFunc(s.Workloads, func(w xdstest.Workload) bool { return w.Node != xdstest.ThisNode })
			lm := startMeshWith(t, s, meshOptions{envoyArgs: []string{
				"--drain-time-s", fmt.Sprint(drainTailEnvoyDrain.Seconds()), "--drain-strategy", "gradual"}})
			here := lm.nodes[xdstest.ThisNode]
			client := xds.PodKey("web", "frontend-0")
			frontend := lm.fabric.pods[client]
			// withdraw publishes the node's configuration without the client pod, as the agent's
			// rebuild does once the pod is forgotten, and waits for Envoy to take it.
			withdraw := func() {
				t.Helper()
				m := here.mesh
				m.Pods = slices.DeleteFunc(slices.Clone(m.Pods), func(p model.LocalPod) bool { return xds.PodKey(p.Namespace, p.Name) == client })
				res, err := lm.builds[xdstest.ThisNode](m)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := lm.srv.Publish(m.Node.Name, res); err != nil {
					t.Fatal(err)
				}
				here.res, here.mesh = res, m
			}

			var conn net.Conn
			var dialErr error
			if err := frontend.Do(func() { conn, dialErr = net.DialTimeout("tcp", "10.96.0.10:8080", 5*time.Second) }); err != nil || dialErr != nil {
				t.Fatalf("dialling payments from %s: %v %v", client, err, dialErr)
			}
			defer conn.Close()
			_ = conn.SetDeadline(time.Now().Add(time.Minute))
			if _, err := fmt.Fprintf(conn, "GET %s?lines=%d&every=%s HTTP/1.1\r\nHost: payments.shop.aether.internal:8080\r\n\r\n",
				testapp.SlowPath, slowLines, slowEvery); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("the slow response through %s's capture listener: %v %v", client, resp, err)
			}
			body := bufio.NewReader(resp.Body)
			if first, err := body.ReadString('\n'); err != nil || first != "line 1\n" {
				t.Fatalf("the slow response's first line: %q, %v", first, err)
			}

			// CNI DEL, the response in flight.
			deleted := time.Now()
			if err := unix.Unmount(frontend.Path, unix.MNT_DETACH); err != nil {
				t.Fatalf("removing %s's namespace, as the runtime does: %v", client, err)
			}
			if !tc.tail {
				withdraw()
			}
			rest, err := io.ReadAll(body)
			took := time.Since(deleted)
			whole := err == nil && strings.HasSuffix(string(rest), fmt.Sprintf("line %d\n%s\n", slowLines, testapp.SlowDone))
			t.Logf("after DEL: read %d bytes in %s, then %v (whole: %v)", len(rest), took.Round(time.Millisecond), err, whole)

			if !tc.tail {
				if whole {
					t.Fatalf("the response finished although the client pod's listeners were withdrawn at DEL: the drain time (%s) did not cut it, so the tail proves nothing",
						drainTailEnvoyDrain)
				}
				if took < drainTailEnvoyDrain {
					t.Errorf("the response was cut %s after DEL, before Envoy's drain time %s: something else cut it", took, drainTailEnvoyDrain)
				}
				return
			}
			if !whole {
				t.Fatalf("the response through the deleted pod's capture listener did not finish during its drain tail: cut %s after DEL (%v), after %q",
					took.Round(time.Millisecond), err, rest)
			}
			if took < 3*drainTailEnvoyDrain {
				t.Fatalf("the response finished %s after DEL, within 3 × Envoy's drain time %s: it proves nothing of the tail", took, drainTailEnvoyDrain)
			}
			// The tail's end: the listeners go.
			withdraw()
			var problems []string
			here.envoy.WaitFor(t, 30*time.Second, "the client pod's capture listener withdrawn at the tail's end", func() (bool, string) {
				d, err := here.configDump()
				if err != nil {
					return false, err.Error()
				}
				if problems = here.problems(d); len(problems) > 0 {
					return true, ""
				}
				return !slices.Contains(d.active["listeners"], xds.CaptureListener(client)), "still active"
			})
			if len(problems) > 0 {
				t.Fatalf("Envoy refused the configuration without the client pod:\n%s", strings.Join(problems, "\n"))
			}
		})
	}
}
