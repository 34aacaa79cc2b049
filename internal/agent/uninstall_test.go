// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aether-mesh/aether-operator/internal/capture"
	"github.com/aether-mesh/aether-operator/internal/capture/apply"
	"github.com/aether-mesh/aether-operator/internal/capture/apply/nstest"
	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/testenv"
	"github.com/aether-mesh/aether-operator/internal/xds/xdstest"
)

// paymentsVIP is the VIP of payments in xdstest.MixedHTTPPrimary, whose TCP port 9000 surface
// mode captures.
const paymentsVIP = "10.96.0.10"

// capturedPod is a network namespace standing in for a meshed pod's: capture programmed in
// surface mode from xdstest.MixedHTTPPrimary (a dial of payments' VIP:9000 goes to
// 127.0.0.1:18001), a server on that VIP:9000 that answers a direct dial, and two tables of other
// owners that an uninstall must leave alone.
func capturedPod(t *testing.T) *nstest.NS {
	t.Helper()
	ns := nstest.NewNamed(t, "aeproxy", paymentsVIP)
	ns.Serve(t, 9000)
	pod := model.LocalPod{Namespace: "web", Name: ns.Name, UID: ns.Name, NetNS: ns.Path, Capture: model.CaptureSurface}
	if _, err := apply.New().Sync(ns.Path, capture.Build(xdstest.MixedHTTPPrimary(), pod, capture.Options{})); err != nil {
		t.Fatal(err)
	}
	ns.Nft(t, "add", "table", "inet", "cni-owned")
	ns.Nft(t, "add", "table", "ip", "workload")
	return ns
}

// tables lists the namespace's nftables tables, one "family name" each.
func tables(t *testing.T, ns *nstest.NS) string {
	t.Helper()
	return strings.Join(strings.Fields(strings.ReplaceAll(ns.Nft(t, "list", "tables"), "table ", "")), " ")
}

func uninstallCount(t *testing.T, result string) float64 {
	t.Helper()
	n, err := testenv.Counter("aether_agent_uninstall_capture_tables_total", "result", result)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestUninstallRestoresEveryPodRestartKeepsCapture: with real capture tables in two namespaces
// (and a third pod whose namespace is already gone), an agent stopping while its DaemonSet stays
// (a restart, an upgrade) leaves the CNI plugin and every table; stopping once the DaemonSet is
// deleted, it removes the plugin, then table inet aether from every pod of the registry, and only
// that table: the pods' dials go directly to their destinations again, each pod is counted, and
// the registry is emptied.
func TestUninstallRestoresEveryPodRestartKeepsCapture(t *testing.T) {
	ctx := testContext(t)
	k8sNS := namespace(t, ctx)
	labels := map[string]string{"app": "agent"}
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: k8sNS, Name: "agent"},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "registry.example/agent:1"}}},
		}},
	}
	if err := env.Client.Create(ctx, ds); err != nil {
		t.Fatal(err)
	}
	self := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: k8sNS, Name: "agent-x1", OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "apps/v1", Kind: "DaemonSet", Name: ds.Name, UID: ds.UID, Controller: new(true)}}},
		Spec: ds.Spec.Template.Spec,
	}
	if err := env.Client.Create(ctx, self); err != nil {
		t.Fatal(err)
	}

	a, b := capturedPod(t), capturedPod(t)
	registry := NewNetNS()
	gone := fmt.Sprintf("/var/run/netns/aeproxy-%d-gone", os.Getpid())
	for uid, path := range map[types.UID]string{"pod-a": a.Path, "pod-b": b.Path, "pod-gone": gone} {
		if err := registry.Record(uid, path); err != nil {
			t.Fatal(err)
		}
	}
	pods := map[*nstest.NS]string{a: paymentsVIP + ":9000", b: paymentsVIP + ":9000"}
	for ns, target := range pods {
		if got, want := ns.Dial(target), nstest.Captured+" "+target; got != want {
			t.Fatalf("before: dial %s from %s: %q, want %q", target, ns.Name, got, want)
		}
	}
	plugin := 0
	removePlugin := func() error { plugin++; return nil }
	before := map[string]float64{}
	for _, r := range []string{UninstallRemoved, UninstallAbsent, UninstallFailed} {
		before[r] = uninstallCount(t, r)
	}
	key := client.ObjectKeyFromObject(self)

	// A restart: the DaemonSet stays.
	removed, err := UninstallIfRemoved(ctx, Self{Pod: key}, env.Client, nil, registry, removePlugin, logr.Discard())
	if removed || err != nil || plugin != 0 {
		t.Fatalf("with the DaemonSet in place: removed %v, err %v, plugin removed %d times; want nothing done", removed, err, plugin)
	}
	for ns, target := range pods {
		if got, want := ns.Dial(target), nstest.Captured+" "+target; got != want {
			t.Errorf("after a restart: dial %s from %s: %q, want %q (still captured)", target, ns.Name, got, want)
		}
		if got := tables(t, ns); got != "inet aether inet cni-owned ip workload" {
			t.Errorf("after a restart, %s holds tables %q", ns.Name, got)
		}
	}
	if n := len(registry.Paths()); n != 3 {
		t.Errorf("after a restart the registry names %d pods, want 3", n)
	}

	// The uninstall: the DaemonSet is deleted.
	if err := env.Client.Delete(ctx, ds); err != nil {
		t.Fatal(err)
	}
	testenv.EventuallyGone(t, env.Client, ds)
	removed, err = UninstallIfRemoved(ctx, Self{Pod: key}, env.Client, nil, registry, removePlugin, logr.Discard())
	if !removed || err != nil || plugin != 1 {
		t.Fatalf("with the DaemonSet deleted: removed %v, err %v, plugin removed %d times; want the mesh off the node, the plugin removed once", removed, err, plugin)
	}
	for ns, target := range pods {
		if got, want := ns.Dial(target), nstest.Direct+" "+target; got != want {
			t.Errorf("after the uninstall: dial %s from %s: %q, want %q", target, ns.Name, got, want)
		}
		if got := tables(t, ns); got != "inet cni-owned ip workload" {
			t.Errorf("after the uninstall, %s holds tables %q, want the other owners' only", ns.Name, got)
		}
	}
	if paths := registry.Paths(); len(paths) != 0 {
		t.Errorf("after the uninstall the registry still names %v", paths)
	}
	for r, want := range map[string]float64{UninstallRemoved: 2, UninstallAbsent: 1, UninstallFailed: 0} {
		if got := uninstallCount(t, r) - before[r]; got != want {
			t.Errorf("aether_agent_uninstall_capture_tables_total{result=%q} went up by %v, want %v", r, got, want)
		}
	}
}
