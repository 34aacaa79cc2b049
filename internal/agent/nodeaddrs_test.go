// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/capture"
	"github.com/aether-mesh/aether-operator/internal/capture/apply"
	"github.com/aether-mesh/aether-operator/internal/capture/apply/nstest"
	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/nodeaddrs"
	"github.com/aether-mesh/aether-operator/internal/testenv"
)

// setHolds waits until set name of pns's table, as nft lists it, holds want and none of absent.
func setHolds(t *testing.T, pns *nstest.NS, name string, want []string, absent ...string) {
	t.Helper()
	testenv.Eventually(t, fmt.Sprintf("set %s holds %v and none of %v", name, want, absent), func() error {
		got := pns.SetElements(t, name)
		for _, w := range want {
			if !slices.Contains(got, w) {
				return fmt.Errorf("it holds %v", got)
			}
		}
		for _, a := range absent {
			if slices.Contains(got, a) {
				return fmt.Errorf("it holds %v", got)
			}
		}
		return nil
	})
}

// TestCaptureFollowsNodeAddresses: the node's addresses, which capture never redirects, follow
// the node while the agent runs, into a captured pod's sets node_addrs4/node_addrs6, element by
// element, its rules untouched (the same handles). The node here is a namespace standing in for
// the node's (CaptureOptions.NodeNetNS) and its Node object, on the real API server.
//
//   - An address of the node's own interface at start is in the set; one added after start is
//     too (rtnetlink announces it).
//   - kube-ipvs0 (kube-proxy's IPVS interface) holding the pod's service's VIP, and another
//     ClusterIP, adds neither, and a dial to the VIP stays captured.
//   - The Node reporting an address (status.addresses, InternalIP) puts it in the set: in mode all,
//     where the address of a meshed pod (hostnet-0, a pod of another node's network,
//     10.244.9.9) was captured, a dial to it leaves the pod directly once it is the node's too.
func TestCaptureFollowsNodeAddresses(t *testing.T) {
	const (
		nicAddr   = "10.0.7.1"
		laterAddr = "10.0.7.2"
		otherIP   = "10.96.200.99" // a ClusterIP of no mesh service
		hostAddr  = "10.244.9.9"   // hostnet-0's, then the node's too
	)
	ctx := testContext(t)
	ns := namespace(t, ctx)
	node := nstest.New(t)
	node.IP(t, "link", "add", "aeeth0", "type", "bridge")
	node.IP(t, "addr", "add", nicAddr+"/24", "dev", "aeeth0")
	node.IPVSInterface(t)
	a := startXDSAgent(t, ns, func(o *XDSOptions) {
		withCapture(apply.New())(o)
		o.Capture.NodeNetNS = node.Path
	})

	// hostnet-0: a meshed pod of another node, as that node's agent registers it, Verified by the
	// test (the package's controller does not see the isolated namespace).
	iso := isolatedNamespace(t, ctx)
	ms := &meshv1alpha1.MeshService{ObjectMeta: metav1.ObjectMeta{Namespace: iso, Name: "hostnet"}}
	if err := env.Client.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), ms) })
	ep := createTCPEndpoint(t, ctx, iso, "hostnet-0", "hostnet", "other-"+ns, hostAddr, 9000)
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), ep) })
	setStatus(t, ctx, ep, meshv1alpha1.HealthHealthy, ep.Generation)

	annotations := paymentsAnnotations()
	annotations[model.AnnotationCaptureMode] = string(model.CaptureAll)
	pod := createPod(t, ctx, ns, "client", a.node, newPodIP(), true, annotations)
	vip := serviceVIP(t, ctx, ns, "payments")
	pns := nstest.New(t, vip, hostAddr)
	pns.Serve(t, 9000)
	if err := a.options.XDS.NetNS.Record(pod.UID, pns.Path); err != nil {
		t.Fatal(err)
	}
	host := hostAddr + ":9000"
	dialsTo(t, pns, host, nstest.Captured+" "+host)
	setHolds(t, pns, capture.SetNodeAddrs4, []string{nicAddr})
	handles := pns.RuleHandles(t)

	t.Run("an address added to the node's interface, and kube-ipvs0's", func(t *testing.T) {
		node.IP(t, "addr", "add", vip+"/32", "dev", nodeaddrs.IPVSInterface)
		node.IP(t, "addr", "add", otherIP+"/32", "dev", nodeaddrs.IPVSInterface)
		node.IP(t, "addr", "add", laterAddr+"/24", "dev", "aeeth0")
		setHolds(t, pns, capture.SetNodeAddrs4, []string{nicAddr, laterAddr}, vip, otherIP)
		address := vip + ":9000"
		if got, want := pns.Dial(address), nstest.Captured+" "+address; got != want {
			t.Errorf("dial %s (payments' VIP, on the node's kube-ipvs0): %q, want %q", address, got, want)
		}
	})

	t.Run("an address the Node reports", func(t *testing.T) {
		n := &corev1.Node{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: a.node}, n); err != nil {
			t.Fatal(err)
		}
		patch := client.MergeFrom(n.DeepCopy())
		n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: a.node}, {Type: corev1.NodeInternalIP, Address: hostAddr}}
		if err := env.Client.Status().Patch(ctx, n, patch); err != nil {
			t.Fatal(err)
		}
		setHolds(t, pns, capture.SetNodeAddrs4, []string{nicAddr, laterAddr, hostAddr})
		if got, want := pns.Dial(host), nstest.Direct+" "+host; got != want {
			t.Errorf("dial %s, the node's address now: %q, want %q", host, got, want)
		}
	})

	if got := pns.RuleHandles(t); !slices.Equal(got, handles) {
		t.Errorf("rule handles %v after the node's addresses changed, want %v unchanged", got, handles)
	}
}
