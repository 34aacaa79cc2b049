// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package envoy_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/aether-mesh/aether-operator/internal/capture/apply/nstest"
	"github.com/aether-mesh/aether-operator/internal/cgrouptest"
	"github.com/aether-mesh/aether-operator/internal/metricstest"
	"github.com/aether-mesh/aether-operator/internal/testroot"
	"github.com/aether-mesh/aether-operator/internal/xds"
	"github.com/aether-mesh/aether-operator/internal/xds/xdstest"
	"github.com/aether-mesh/aether-operator/internal/xdsserver"
	servertest "github.com/aether-mesh/aether-operator/internal/xdsserver/xdstest"
)

// TestTheNodeEnvoysPodIsServedAndNoOtherCaller: the node's xDS socket serves the node's Envoy by
// its pod, as deployed (config/envoy: --node-envoy-pods, the node's own processes not served). A
// real Envoy 1.40, started in a cgroup named as the kubelet names a pod's, that pod one of the node
// Envoy's DaemonSet's (its namespace, its label, as the agent's cache would hold it), takes the
// whole snapshot, its SDS secrets with it, over a state-of-the-world and a delta stream, and none
// of its streams is refused; the test process on the same socket, a process of the node in no pod,
// is refused with PermissionDenied, and counted (the count moves, so the check above could fail).
func TestTheNodeEnvoysPodIsServedAndNoOtherCaller(t *testing.T) {
	testroot.Require(t, "Envoy in a pod's cgroup, its listeners in network namespaces")
	const envoyUID = "3c4d5e6f-7a8b-4c9d-8e0f-1a2b3c4d5e6f"
	envoyPod := xdsserver.Pod{Namespace: "aether-operator-system", Name: "aether-operator-envoy-x7k2p",
		Labels: map[string]string{"app.kubernetes.io/name": "aether-envoy"}}
	who := xdsserver.NodeEnvoy{Namespace: envoyPod.Namespace, Pods: labels.SelectorFromSet(labels.Set{"app.kubernetes.io/name": "aether-envoy"})}
	for _, delta := range []bool{false, true} {
		t.Run(streamName(delta), func(t *testing.T) {
			m := xdstest.All()["pure-http"]
			pods := map[string]*nstest.NS{}
			for _, p := range m.Pods {
				pods[xds.PodKey(p.Namespace, p.Name)] = nstest.NewNamed(t, "aelive", p.Address)
			}
			socket := filepath.Join(t.TempDir(), "xds.sock")
			srv := serveXDSFor(t, socket, who, nil)
			srv.ResolvePodsWith(func(_ context.Context, uid string) (xdsserver.Pod, bool, error) {
				return envoyPod, uid == envoyUID, nil
			})
			before := refusedOnTheNodeSocket(t)

			n := startNodeOn(t, m, nodeOptions{delta: delta, pods: pods, xds: srv, cgroupFD: cgrouptest.Pod(t, envoyUID, true)})
			n.requireAccepted(t)
			if len(n.secrets) == 0 {
				t.Fatal("the scenario's snapshot names no secret: SDS went untested")
			}
			if after := refusedOnTheNodeSocket(t); after != before {
				t.Errorf("the node's socket refused %v streams while the node Envoy's pod took its snapshot, want none", after-before)
			}

			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			c, err := servertest.Dial(ctx, "unix://"+socket, m.Node.Name)
			if err == nil {
				// The refusal ends the stream: Await returns how.
				err = c.Await(ctx, func(servertest.State) error { return errors.New("the stream is open") })
				c.Close()
			}
			if err == nil || !strings.Contains(err.Error(), "code = PermissionDenied") || !strings.Contains(err.Error(), "is a process of the node") {
				t.Errorf("the test process (a node process) on the node's socket: %v, want PermissionDenied saying it is a process of the node", err)
			}
			if after := refusedOnTheNodeSocket(t); after != before+1 {
				t.Errorf("aether_agent_xds_node_refused_total moved by %v with the test process's stream, want 1", after-before)
			}
		})
	}
}

// TestEnvoyInATenantsPodIsRefused is the negative control of
// TestTheNodeEnvoysPodIsServedAndNoOtherCaller: the same Envoy, with the same bootstrap, started
// in a tenant pod's cgroup (a tenant running Envoy's image as uid 0, the node's socket reached by a
// link or a mount) is refused every stream, counted as not the node Envoy's, holds none of the
// snapshot's listeners or secrets, and stays initializing.
func TestEnvoyInATenantsPodIsRefused(t *testing.T) {
	testroot.Require(t, "Envoy in a pod's cgroup, its listeners in network namespaces")
	const tenantUID = "4d5e6f7a-8b9c-4d0e-8f1a-2b3c4d5e6f7a"
	tenantPod := xdsserver.Pod{Namespace: "shop", Name: "web-0", Labels: map[string]string{"app.kubernetes.io/name": "aether-envoy"}}
	who := xdsserver.NodeEnvoy{Namespace: "aether-operator-system", Pods: labels.SelectorFromSet(labels.Set{"app.kubernetes.io/name": "aether-envoy"})}
	m := xdstest.All()["pure-http"]
	pods := map[string]*nstest.NS{}
	for _, p := range m.Pods {
		pods[xds.PodKey(p.Namespace, p.Name)] = nstest.NewNamed(t, "aelive", p.Address)
	}
	srv := serveXDSFor(t, filepath.Join(t.TempDir(), "xds.sock"), who, nil)
	srv.ResolvePodsWith(func(_ context.Context, uid string) (xdsserver.Pod, bool, error) {
		return tenantPod, uid == tenantUID, nil
	})
	before, err := metricstest.Sum(ctrlmetrics.Registry, "aether_agent_xds_node_refused_total", map[string]string{"reason": "not_envoy"}, metricstest.CounterValue)
	if err != nil {
		t.Fatal(err)
	}

	n := startNodeOn(t, m, nodeOptions{pods: pods, xds: srv, cgroupFD: cgrouptest.Pod(t, tenantUID, false), unready: true})
	n.envoy.WaitFor(t, 30*time.Second, "the node's socket to refuse Envoy in a tenant's pod", func() (bool, string) {
		after, err := metricstest.Sum(ctrlmetrics.Registry, "aether_agent_xds_node_refused_total", map[string]string{"reason": "not_envoy"}, metricstest.CounterValue)
		if err != nil {
			return false, err.Error()
		}
		return after > before, fmt.Sprintf("aether_agent_xds_node_refused_total{reason=not_envoy} still %v", after)
	})
	if body, err := n.envoy.Get("/ready"); err == nil || !strings.Contains(string(body), "INITIALIZING") {
		t.Errorf("Envoy in a tenant's pod: /ready %q, %v; want it initializing", body, err)
	}
	d, err := n.configDump()
	if err != nil {
		t.Fatal(err)
	}
	for _, section := range []string{"listeners", "secrets"} {
		if held := d.active[section]; len(held) > 0 {
			t.Errorf("Envoy in a tenant's pod holds the %s %q, want none", section, held)
		}
	}
}

// refusedOnTheNodeSocket is aether_agent_xds_node_refused_total, summed over its reasons.
func refusedOnTheNodeSocket(t testing.TB) float64 {
	t.Helper()
	n, err := metricstest.Sum(ctrlmetrics.Registry, "aether_agent_xds_node_refused_total", nil, metricstest.CounterValue)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
