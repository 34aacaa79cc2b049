// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package envoy_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aether-mesh/aether-operator/internal/capture/apply/nstest"
	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/netnsprobe"
	"github.com/aether-mesh/aether-operator/internal/xds"
	"github.com/aether-mesh/aether-operator/internal/xds/xdstest"
)

// TestAPodWithoutIPv6InADualStackMesh: in a mesh that uses IPv6, a pod whose namespace has IPv6
// turned off (disable_ipv6=1: no ::1) must keep its IPv4 listeners. Envoy fails a listener whole
// when one of its addresses cannot be bound, so the capture listener's [::1]:18001 took
// 127.0.0.1:18001 down with it, and the pod's every mesh dial with it. The agent probes each
// namespace (netnsprobe) and the builder binds such a pod's listeners IPv4 only.
//
// "as the mesh says" is the negative control, the builder as it was (IPv6 bound in every pod's
// namespace): Envoy must refuse it, with its reason.
func TestAPodWithoutIPv6InADualStackMesh(t *testing.T) {
	for _, tc := range []struct {
		name  string
		probe bool
	}{{"as the mesh says", false}, {"as the probe says", true}} {
		t.Run(tc.name, func(t *testing.T) {
			m := xdstest.All()["dual-stack-mesh"]
			pods := map[string]*nstest.NS{}
			var v4only string
			for i, p := range m.Pods {
				ns := nstest.NewNamed(t, "aelive", p.Address)
				key := xds.PodKey(p.Namespace, p.Name)
				pods[key] = ns
				if !strings.Contains(p.Address, ":") && v4only == "" {
					v4only = key
					ns.DisableIPv6(t)
				}
				if tc.probe {
					on, err := netnsprobe.IPv6Loopback(ns.Path)
					if err != nil {
						t.Fatal(err)
					}
					m.Pods[i].NoIPv6 = !on
				}
			}
			if v4only == "" {
				t.Fatal("the scenario has no IPv4 pod to turn IPv6 off in: the test proves nothing")
			}
			n := startNodeOn(t, m, nodeOptions{pods: pods, xds: serveXDS(t)})
			problems := n.waitSettled(t, 30*time.Second)
			if !tc.probe {
				if len(problems) == 0 {
					t.Fatalf("Envoy took %s's listeners with [::1] in a namespace without IPv6: the control shows nothing", v4only)
				}
				t.Logf("as the builder was, Envoy refused (as it must):\n%s", strings.Join(problems, "\n"))
				return
			}
			if !slices.ContainsFunc(m.Pods, func(p model.LocalPod) bool { return p.NoIPv6 }) {
				t.Fatalf("the probe found IPv6 in %s's namespace after it was turned off", v4only)
			}
			if len(problems) > 0 {
				t.Fatalf("Envoy refused:\n%s", strings.Join(problems, "\n"))
			}
			n.requireBound(t)
		})
	}
}
