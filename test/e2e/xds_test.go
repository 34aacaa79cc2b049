//go:build e2e

// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"

	"github.com/aether-mesh/aether-operator/internal/resolve"
	"github.com/aether-mesh/aether-operator/internal/xds"
	"github.com/aether-mesh/aether-operator/internal/xdsserver/xdstest"
)

// samplePods are the pods make run creates for the sample Deployment, and their addresses.
var samplePods = map[string]string{"payments-0": "127.0.0.11", "payments-1": "127.0.0.12", "payments-2": "127.0.0.13"}

// extraPod is a pod of the sample service the xDS check creates, at an address nothing serves.
const extraPod = `apiVersion: v1
kind: Pod
metadata:
  name: payments-extra
  namespace: shop
  labels: {app: payments, aether.io/managed: "true"}
  annotations:
    endpoint.aether.io/port: "8080"
    endpoint.aether.io/ports: "8080,9090=h2,9000=tcp"
    endpoint.aether.io/health-path: /healthz
spec:
  nodeName: node-a
  serviceAccountName: payments
  containers:
  - {name: app, image: registry.example/payments:1.4.2}
`

// kubectlRun runs kubectl against make run's API server and returns its output.
type kubectlRun func(args ...string) (string, error)

// checkXDS is the acceptance of the agent's xDS serving (issue 12), against make run's agent: a
// real ADS client, as node-a's Envoy, receives the sample payments service's listeners, clusters,
// endpoints and routes and ACKs them; after a pod's health changes (deleted: Draining) it
// receives an endpoints update and no listener update; a NACK is logged by the agent with the
// resource and the reason, and the stream still delivers what follows.
//
// "No listener update": after the health changes, a pod is added, and the first LDS response
// since the initial one must carry its listener (a listener update caused by the health change
// would have come first, on the same ordered stream).
func checkXDS(t *testing.T, ctx context.Context, address string, kubectl kubectlRun, agentLog string) {
	identity, err := kubectl("get", "meshservice", "payments", "-n", "shop", "-o", "jsonpath={.status.identity}")
	if err != nil || identity == "" {
		t.Fatalf("the sample service's identity: %q, %v", identity, err)
	}
	fqdn := xds.FQDN("payments", "shop", resolve.DefaultMeshDomain)
	c, err := xdstest.Dial(ctx, address, "node-a")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	var clusters, assignments, listeners []string
	for _, p := range []int32{8080, 9090} {
		clusters = append(clusters, xds.SourceCluster(xds.HTTPCluster(fqdn, p), identity))
	}
	clusters = append(clusters, xds.SourceCluster(xds.TCPCluster(fqdn, 9000), identity), xds.SourceCluster(xds.TCPDefaultCluster(fqdn), identity))
	for _, p := range []int32{8080, 9000, 9090} {
		assignments = append(assignments, xds.LoadAssignment(fqdn, p))
	}
	for pod := range samplePods {
		listeners = append(listeners, xds.CaptureListener(xds.PodKey("shop", pod)), xds.ProxyListener(xds.PodKey("shop", pod)),
			xds.InboundListener(xds.PodKey("shop", pod)))
	}
	routes := []string{xds.CaptureRoutes(identity), xds.ProxyRoutes(identity)}
	first, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := c.Await(first, func(s xdstest.State) error {
		for typ, names := range map[string][]string{xdstest.Clusters: clusters, xdstest.Endpoints: assignments,
			xdstest.Listeners: listeners, xdstest.Routes: routes} {
			for _, name := range names {
				if _, ok := s.Resources[typ][name]; !ok {
					return fmt.Errorf("no %s %q among %v", typ, name, keys(s.Resources[typ]))
				}
			}
		}
		for _, name := range assignments {
			for pod, ip := range samplePods {
				if h := health(s.LoadAssignment(name), ip); h != "HEALTHY" {
					return fmt.Errorf("load assignment %s: %s (%s) is %q, want HEALTHY", name, pod, ip, h)
				}
			}
		}
		return nil
	}); err != nil {
		t.Fatalf("make run's agent never served the sample service: %v", err)
	}
	s := c.State()
	for _, typ := range []string{xdstest.Clusters, xdstest.Endpoints, xdstest.Listeners, xdstest.Routes} {
		got := s.Received(typ)
		if last := got[len(got)-1]; last.NACKed || s.Versions[typ] != last.Version {
			t.Errorf("%s: the client did not ACK the last response %+v (accepted %q)", typ, last, s.Versions[typ])
		}
	}
	ldsBefore := len(s.Received(xdstest.Listeners))
	assignment := xds.LoadAssignment(fqdn, 8080)

	// A pod's health changes: deleted, it is Draining (no kubelet here finishes the deletion).
	if out, err := kubectl("delete", "pod", "payments-2", "-n", "shop", "--wait=false"); err != nil {
		t.Fatalf("kubectl delete pod payments-2: %v\n%s", err, out)
	}
	if err := c.Await(ctx, func(s xdstest.State) error {
		if h := health(s.LoadAssignment(assignment), samplePods["payments-2"]); h != "DRAINING" {
			return fmt.Errorf("load assignment %s: payments-2 is %q, want DRAINING", assignment, h)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	// A NACK: the client rejects the next endpoints update; the agent logs it with the resource
	// and the reason.
	const reason = "e2e: load assignment rejected on purpose"
	c.NACKNext(xdstest.Endpoints, reason)
	if out, err := kubectl("delete", "pod", "payments-1", "-n", "shop", "--wait=false"); err != nil {
		t.Fatalf("kubectl delete pod payments-1: %v\n%s", err, out)
	}
	if err := c.Await(ctx, func(s xdstest.State) error {
		if !slices.ContainsFunc(s.Received(xdstest.Endpoints), func(r xdstest.Response) bool { return r.NACKed }) {
			return fmt.Errorf("no endpoints update rejected yet")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var logged string
	for deadline := time.Now().Add(30 * time.Second); ; {
		raw, err := os.ReadFile(agentLog)
		if err != nil {
			t.Fatal(err)
		}
		if logged = nackLine(string(raw), reason, assignment, xdstest.Endpoints); logged != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the agent's log (%s) has no NACK line naming %s, %s and %q", agentLog, xdstest.Endpoints, assignment, reason)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("the agent logged: %s", logged)

	// The stream is not wedged: a new pod's listeners and endpoint arrive, and are ACKed. Its
	// listener is the first listener update since the initial snapshot.
	manifest := filepath.Join(t.TempDir(), "payments-extra.yaml")
	if err := os.WriteFile(manifest, []byte(extraPod), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := kubectl("apply", "-f", manifest); err != nil {
		t.Fatalf("kubectl apply -f %s: %v\n%s", manifest, err, out)
	}
	if out, err := kubectl("patch", "pod", "payments-extra", "-n", "shop", "--subresource=status", "--type=merge", "-p",
		`{"status":{"phase":"Running","podIP":"127.0.0.14","podIPs":[{"ip":"127.0.0.14"}]}}`); err != nil {
		t.Fatalf("setting payments-extra's IP: %v\n%s", err, out)
	}
	extraListener := xds.CaptureListener(xds.PodKey("shop", "payments-extra"))
	if err := c.Await(ctx, func(s xdstest.State) error {
		if _, ok := s.Resources[xdstest.Listeners][extraListener]; !ok {
			return fmt.Errorf("no listener %s", extraListener)
		}
		if xdstest.LbEndpoint(s.LoadAssignment(assignment), "127.0.0.14") == nil {
			return fmt.Errorf("load assignment %s does not list payments-extra (127.0.0.14)", assignment)
		}
		return nil
	}); err != nil {
		t.Fatalf("after the NACK the stream delivered nothing more: %v", err)
	}
	s = c.State()
	lds := s.Received(xdstest.Listeners)[ldsBefore:]
	if !slices.Contains(lds[0].Names, extraListener) {
		t.Errorf("the first LDS response after the health changes lacks %s: the health change sent a listener update (%+v)", extraListener, lds)
	}
	if n := len(slices.DeleteFunc(slices.Clone(s.History), func(r xdstest.Response) bool { return !r.NACKed })); n != 1 {
		t.Errorf("%d responses NACKed, want the one rejected on purpose", n)
	}
}

// nackLine is the agent's log line that reports a NACK of typeURL naming resource and reason, or "".
func nackLine(log, reason, resource, typeURL string) string {
	for line := range strings.SplitSeq(log, "\n") {
		if strings.Contains(line, "NACK") && strings.Contains(line, reason) && strings.Contains(line, resource) && strings.Contains(line, typeURL) {
			return line
		}
	}
	return ""
}

// health is the health status of the endpoint at ip in cla, or "absent".
func health(cla *endpointv3.ClusterLoadAssignment, ip string) string {
	if lb := xdstest.LbEndpoint(cla, ip); lb != nil {
		return lb.GetHealthStatus().String()
	}
	return "absent"
}

func keys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// kubectlFor is kubectl (from assets) against kubeconfig.
func kubectlFor(ctx context.Context, assets, kubeconfig string) kubectlRun {
	return func(args ...string) (string, error) {
		out, err := exec.CommandContext(ctx, filepath.Join(assets, "kubectl"), append([]string{"--kubeconfig", kubeconfig}, args...)...).CombinedOutput()
		return string(out), err
	}
}
