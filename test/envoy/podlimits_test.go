// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package envoy_test

import (
	"fmt"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/aether-mesh/aether-operator/internal/xds"
	"github.com/aether-mesh/aether-operator/internal/xds/xdssim"
	"github.com/aether-mesh/aether-operator/internal/xds/xdstest"
	"github.com/aether-mesh/aether-operator/internal/xds/xdswalk"
)

// TestOnePodAtItsLimitLeavesOthersServed: frontend-0 opens more connections to its proxy
// listener than its limit allows, and payments-0, on the same node, is still served through the
// mesh. The node's cap is lowered to 60 connections and each pod listener's limit to 40 (the
// agent's runtime layer, as served, with its values scaled down), so that one pod at its limit
// holds two thirds of the node. The negative control lifts the pod limit in the same layer (as
// the node had before it): frontend-0 then holds all 60, and payments-0's connection is closed
// on accept, over the node's cap. With the pod limit lifted in the first case too (as before the
// layer) it failed: "payments-0's request through the mesh: refused [closed], want payments-1's
// application: frontend-0 at its limit (60 held) left the node none". Envoy's /runtime shows
// each pod's capture listener's key as well.
func TestOnePodAtItsLimitLeavesOthersServed(t *testing.T) {
	const nodeCap, podLimit, opened = 60, 40, 70
	for _, tc := range []struct {
		name       string
		limit      float64
		wantServed bool
	}{
		{"a pod limit of 40", podLimit, true},
		{"negative control: no pod limit", 1e6, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lm := startMeshWith(t, xdstest.Scenarios()["mixed-http-primary"], meshOptions{
				maxConnections: nodeCap,
				mutate: func(res *xds.Resources) {
					fields := res.Runtimes[0].GetLayer().GetFields()
					for key := range fields {
						fields[key] = structpb.NewNumberValue(tc.limit)
					}
				},
			})
			e := lm.nodes[xdstest.ThisNode].envoy
			stat := func(name string) uint64 {
				return statSum(t, e, regexp.MustCompile(`^listener\.127\.0\.0\.1_18081\.`+name+`$`))
			}
			// frontend-0 opens its connections and holds them, sending nothing: each one the
			// proxy listener accepts is an open connection of the node's Envoy.
			frontend := lm.fabric.pods[xds.PodKey("web", "frontend-0")]
			for range opened {
				var c net.Conn
				var err error
				if doErr := frontend.Do(func() { c, err = net.DialTimeout("tcp", "127.0.0.1:18081", 5*time.Second) }); doErr != nil || err != nil {
					t.Fatalf("frontend-0 dialling its proxy listener: %v %v", doErr, err)
				}
				t.Cleanup(func() { _ = c.Close() })
			}
			// Every dial is decided once the listener has accepted or refused it.
			e.WaitFor(t, 20*time.Second, "every connection of frontend-0 held or refused", func() (bool, string) {
				active, pod, node := stat("downstream_cx_active"), stat("downstream_cx_overflow"), stat("downstream_global_cx_overflow")
				return active+pod+node == opened, fmt.Sprintf("%d held, %d over the pod's limit, %d over the node's cap, of %d", active, pod, node, opened)
			})
			active, overPod, overNode := stat("downstream_cx_active"), stat("downstream_cx_overflow"), stat("downstream_global_cx_overflow")
			t.Logf("frontend-0: %d connections held, %d refused over its limit, %d over the node's cap", active, overPod, overNode)

			payments := client{ns: lm.fabric.pods[xds.PodKey("shop", "payments-0")], podOf: lm.fabric.pod, window: 2 * time.Second}
			// Pinned to payments-1, on another node: this node's Envoy holds one connection for it.
			seen := payments.send(xdssim.Conn{DstIP: "10.96.0.10", DstPort: 8080, HTTP: &xdssim.Request{
				Host: "payments.shop.aether.internal:8080", Headers: map[string]string{"x-aether-pod": "payments-1"},
			}}, xdswalk.ShapeHTTP11)
			served := seen.Kind == xdswalk.SawApp && strings.Join(seen.Pods, ",") == "shop/payments-1"
			t.Logf("payments-0's request: %s", seen)

			if !tc.wantServed {
				if served {
					t.Errorf("the negative control: payments-0 was served (%s) while frontend-0 held %d connections: a pod limit that does not matter", seen, active)
				}
				if overNode == 0 {
					t.Errorf("the negative control: no connection of frontend-0 was over the node's cap of %d (%d held)", nodeCap, active)
				}
				return
			}
			if !served {
				t.Errorf("payments-0's request through the mesh: %s, want payments-1's application: frontend-0 at its limit (%d held) left the node none", seen, active)
			}
			// Envoy may pass a listener's limit by about one connection per worker (2 here).
			if active > podLimit+2 || overPod < opened-podLimit-2 {
				t.Errorf("frontend-0 holds %d connections, %d refused over its limit, want at most %d held", active, overPod, podLimit+2)
			}
			if overNode != 0 {
				t.Errorf("%d connections of frontend-0 were refused over the node's cap, want none: its own limit comes first", overNode)
			}
			runtime, err := e.Get("/runtime")
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range []string{xds.CaptureListener("web/frontend-0"), xds.CaptureListener("shop/payments-0"), xds.ProxyListener("shop/payments-0")} {
				if key := xds.ListenerConnectionLimitKey(l); !strings.Contains(string(runtime), `"`+key+`"`) {
					t.Errorf("Envoy's /runtime holds no %s", key)
				}
			}
		})
	}
}
