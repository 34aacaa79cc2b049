// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aether-mesh/aether-operator/internal/cni"
	"github.com/aether-mesh/aether-operator/internal/portspec"
	"github.com/aether-mesh/aether-operator/internal/testenv"
	"github.com/aether-mesh/aether-operator/internal/testroot"
	"github.com/aether-mesh/aether-operator/internal/xds"
)

// pinnedBy says whether one of this process's descriptors is open on the file path names (a
// network namespace's, or any other), by its device and inode: path itself may be gone since.
func pinnedBy(t *testing.T, namespace fileID) bool {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	for _, fd := range fds {
		link, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name()))
		if err != nil || !strings.HasPrefix(link, "socket:") {
			continue
		}
		n, err := strconv.Atoi(fd.Name())
		if err != nil {
			continue
		}
		// SIOCGSKNS: a descriptor of the socket's network namespace.
		ns, err := unix.IoctlRetInt(n, unix.SIOCGSKNS)
		if err != nil {
			continue
		}
		var st unix.Stat_t
		err = unix.Fstat(ns, &st)
		_ = unix.Close(ns)
		if err == nil && st.Dev == namespace.dev && st.Ino == namespace.ino {
			return true
		}
	}
	return false
}

// fileID is a file's identity: its device and inode.
type fileID struct{ dev, ino uint64 }

func (f fileID) String() string { return fmt.Sprintf("device %d inode %d", f.dev, f.ino) }

func idOf(path string) (fileID, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return fileID{}, err
	}
	return fileID{dev: st.Dev, ino: st.Ino}, nil
}

// mustID is path's identity.
func mustID(t *testing.T, path string) fileID {
	t.Helper()
	id, err := idOf(path)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// TestNetNSDrainTailPinsTheNamespace: DEL (DrainSandbox) forgets the pod at once, as every reader
// of the recorded paths sees it, and pins its namespace by a socket made in it: the runtime's
// removal of the bind mount succeeds, even as a plain (not lazy) unmount, and the namespace lives
// on in the pin. A new ADD of the same pod
// ends the tail at once (the pin closed); a tail left alone ends when it is due, tells the change
// (the publisher's rebuild) and closes its pin. ForgetSandbox starts no tail.
func TestNetNSDrainTailPinsTheNamespace(t *testing.T) {
	testroot.Require(t, "a network namespace, pinned past ip netns del")
	name := fmt.Sprintf("aetail-%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v: %s", name, err, out)
	}
	path := "/var/run/netns/" + name
	// Deleted below, as the runtime does; here too in case the test stops before.
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
	namespace := mustID(t, path) // the namespace's own inode (nsfs), which its bind mount shows

	n := NewNetNS()
	changes := make(chan struct{}, 8)
	n.onChange(func() { changes <- struct{}{} })
	const uid = types.UID("uid-1")
	if err := n.RecordSandbox(uid, "sandbox-1", path); err != nil {
		t.Fatal(err)
	}
	if pinnedBy(t, namespace) {
		t.Fatal("the namespace is pinned before any DEL: the check below would prove nothing")
	}
	if got, forgot := n.DrainSandbox(uid, "sandbox-1", time.Hour); !forgot || got != uid {
		t.Fatalf("DEL forgot %v %q", forgot, got)
	}
	if _, _, ok := n.Sandbox(uid); ok {
		t.Error("the pod is still recorded after DEL: it must be forgotten at once")
	}
	if d := n.draining(); d[uid] != path {
		t.Errorf("draining after DEL: %v, want %s: %s", d, uid, path)
	}
	// The runtime's removal of the namespace, as plain as it can be: an unmount that is not lazy
	// (which a descriptor of the path would fail with EBUSY), and the unlink.
	if err := unix.Unmount(path, 0); err != nil {
		t.Fatalf("unmounting %s with the pin held: %v", path, err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if !pinnedBy(t, namespace) {
		t.Errorf("no descriptor of the agent holds %s after DEL: the namespace is not pinned", namespace)
	}

	// The pod's sandbox added again: the old tail ends at once.
	second := name + "-2"
	if out, err := exec.Command("ip", "netns", "add", second).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v: %s", second, err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", second).Run() })
	replacement := "/var/run/netns/" + second
	if err := n.RecordSandbox(uid, "sandbox-2", replacement); err != nil {
		t.Fatal(err)
	}
	if d := n.draining(); len(d) != 0 {
		t.Errorf("draining after the pod's new ADD: %v, want none", d)
	}
	if pinnedBy(t, namespace) {
		t.Errorf("the old sandbox's namespace %s is still pinned after the pod's new ADD", namespace)
	}

	// A tail left alone ends when due, and tells.
	for len(changes) > 0 {
		<-changes
	}
	const tail = 300 * time.Millisecond
	start := time.Now()
	if _, forgot := n.DrainSandbox(uid, "sandbox-2", tail); !forgot {
		t.Fatal("the second DEL forgot nothing")
	}
	<-changes // DEL's own
	if !pinnedBy(t, mustID(t, replacement)) {
		t.Errorf("%s is not pinned during its tail", replacement)
	}
	select {
	case <-changes:
	case <-time.After(10 * time.Second):
		t.Fatalf("the tail's end told no change after 10 s (tail %s)", tail)
	}
	if took := time.Since(start); took < tail {
		t.Errorf("the tail ended after %s, before its %s", took, tail)
	}
	if d := n.draining(); len(d) != 0 {
		t.Errorf("draining after the tail's end: %v, want none", d)
	}
	if pinnedBy(t, mustID(t, replacement)) {
		t.Errorf("%s is still pinned after its tail", replacement)
	}

	// ForgetSandbox (a failed ADD's undo) starts no tail.
	if err := n.RecordSandbox(uid, "sandbox-3", replacement); err != nil {
		t.Fatal(err)
	}
	if _, forgot := n.ForgetSandbox(uid, "sandbox-3"); !forgot {
		t.Fatal("ForgetSandbox forgot nothing")
	}
	if d := n.draining(); len(d) != 0 {
		t.Errorf("draining after ForgetSandbox: %v, want none", d)
	}
}

// testDrainTail is TestCNIDrainTail's tail: long enough for the steps it takes during one, which
// it checks rather than assumes.
const testDrainTail = 10 * time.Second

// TestCNIDrainTail drives an agent's CNI server over its socket, as the plugin does, and reads
// what its xDS server publishes for the node's Envoy. After a pod's DEL its listeners stay
// published, in the deleted sandbox's namespace, for the drain tail, even once its Pod and
// MeshEndpoint are gone and a later rebuild (another pod's listeners appearing) left them in, and
// they are withdrawn when the tail ends. A pod whose sandbox is added again during its tail has
// its listeners in the new namespace at once, not at the tail's end; so does a new pod of the
// deleted one's name.
func TestCNIDrainTail(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t, ctx)
	socket := filepath.Join(t.TempDir(), "cni.sock")
	a := startXDSAgentWith(t, ns, false, func(o *Options) {
		listener, err := ListenCNI(socket)
		if err != nil {
			t.Fatal(err)
		}
		o.XDS.NetNSPathTemplate = nil // only what the plugin hands over
		o.CNI = &CNIOptions{Listener: listener, NetNS: o.XDS.NetNS, DrainTail: testDrainTail}
	})
	plugin := cni.NewClient(socket)
	call := func(path string, pod *corev1.Pod, sandbox, netns string) {
		t.Helper()
		resp, err := plugin.Call(ctx, path, cni.Request{ContainerID: sandbox, NetNS: netns, Namespace: pod.Namespace, Name: pod.Name, UID: string(pod.UID)})
		if err != nil || !resp.Managed {
			t.Fatalf("%s of %s's sandbox %s: %+v, %v", path, pod.Name, sandbox, resp, err)
		}
	}
	dir := t.TempDir()
	netnsOf := func(sandbox string) string { // a file stands for the namespace: the pin opens it
		path := filepath.Join(dir, sandbox)
		if err := os.WriteFile(path, nil, 0o444); err != nil {
			t.Fatal(err)
		}
		return path
	}
	// published is the namespace the published capture listener of pod name binds in; "" for none.
	published := func(name string) string {
		res, _, ok := a.options.XDS.Server.Published(a.node)
		if !ok {
			return ""
		}
		for _, l := range res.Listeners {
			if l.GetName() == xds.CaptureListener(xds.PodKey(ns, name)) {
				return l.GetAddress().GetSocketAddress().GetNetworkNamespaceFilepath()
			}
		}
		return ""
	}
	publishedIn := func(name, want string) {
		t.Helper()
		testenv.Eventually(t, fmt.Sprintf("pod %s's listeners published in %s", name, want), func() error {
			if got := published(name); got != want {
				return fmt.Errorf("published in %q", got)
			}
			return nil
		})
	}
	annotations := map[string]string{portspec.AnnotationPort: "8080"}

	pod := createPod(t, ctx, ns, "draining", a.node, newPodIP(), true, annotations)
	first := netnsOf("sandbox-1")
	call(cni.PathAdd, pod, "sandbox-1", first)
	publishedIn(pod.Name, first)

	deleted := time.Now()
	call(cni.PathDel, pod, "sandbox-1", "")
	// What follows a DEL on a node: the kubelet deletes the Pod, the agent its MeshEndpoint.
	if err := env.Client.Delete(ctx, pod, client.GracePeriodSeconds(0)); err != nil { // no kubelet here to finish a graceful one
		t.Fatal(err)
	}
	testenv.EventuallyGone(t, env.Client, pod)
	testenv.EventuallyGone(t, env.Client, &meshEndpoint{ObjectMeta: pod.ObjectMeta})
	// A later rebuild, from caches that saw both go (another pod of the same informers, created
	// after), still carries the deleted pod's listeners.
	witness := createPod(t, ctx, ns, "witness", a.node, newPodIP(), true, annotations)
	witnessNetNS := netnsOf("sandbox-witness")
	call(cni.PathAdd, witness, "sandbox-witness", witnessNetNS)
	publishedIn(witness.Name, witnessNetNS)
	if got := published(pod.Name); got != first {
		t.Errorf("during the drain tail (%s after DEL), with its Pod and MeshEndpoint gone, the deleted pod's listeners are published in %q, want %s",
			time.Since(deleted).Round(time.Millisecond), got, first)
	}
	took := time.Since(deleted)
	t.Logf("the deleted pod's listeners checked %s after DEL, its Pod and MeshEndpoint gone", took.Round(time.Millisecond))
	if took >= testDrainTail {
		t.Fatalf("the steps during the tail took %s, longer than the tail %s: raise testDrainTail", took, testDrainTail)
	}
	testenv.Eventually(t, "the deleted pod's listeners withdrawn at the tail's end", func() error {
		if got := published(pod.Name); got != "" {
			return fmt.Errorf("still published in %s", got)
		}
		return nil
	})
	took = time.Since(deleted)
	t.Logf("the deleted pod's listeners withdrawn %s after DEL", took.Round(time.Millisecond))
	if took < testDrainTail {
		t.Errorf("the deleted pod's listeners were withdrawn %s after DEL, before the tail's %s", took, testDrainTail)
	}
	if published(witness.Name) != witnessNetNS {
		t.Error("the witness pod's listeners went with the deleted pod's")
	}

	// A sandbox added again during its pod's tail: the new namespace at once.
	readded := createPod(t, ctx, ns, "readded", a.node, newPodIP(), true, annotations)
	old, replacement := netnsOf("sandbox-a"), netnsOf("sandbox-b")
	oldID := mustID(t, old)
	call(cni.PathAdd, readded, "sandbox-a", old)
	publishedIn(readded.Name, old)
	deleted = time.Now()
	call(cni.PathDel, readded, "sandbox-a", "")
	call(cni.PathAdd, readded, "sandbox-b", replacement)
	publishedIn(readded.Name, replacement)
	if took := time.Since(deleted); took >= testDrainTail {
		t.Errorf("the re-added pod's listeners moved to its new namespace %s after DEL, not before the old tail's end (%s)", took, testDrainTail)
	}
	if path, ok := a.options.XDS.NetNS.draining()[readded.UID]; ok {
		t.Errorf("the tail of %s's old sandbox (%s) still runs after the pod's new ADD", readded.Name, path)
	}
	if pinnedBy(t, oldID) {
		t.Errorf("the old sandbox's namespace %s is still pinned after the pod's new ADD", old)
	}

	// A new pod of a deleted one's name during its tail (a StatefulSet's replacement): its
	// listeners, of the same names, replace the deleted pod's at once.
	replaced := createPod(t, ctx, ns, "replaced", a.node, newPodIP(), true, annotations)
	before, after := netnsOf("sandbox-r1"), netnsOf("sandbox-r2")
	call(cni.PathAdd, replaced, "sandbox-r1", before)
	publishedIn(replaced.Name, before)
	deleted = time.Now()
	call(cni.PathDel, replaced, "sandbox-r1", "")
	if err := env.Client.Delete(ctx, replaced, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	testenv.EventuallyGone(t, env.Client, replaced)
	testenv.EventuallyGone(t, env.Client, &meshEndpoint{ObjectMeta: replaced.ObjectMeta})
	successor := createPod(t, ctx, ns, "replaced", a.node, newPodIP(), true, annotations)
	call(cni.PathAdd, successor, "sandbox-r2", after)
	publishedIn(successor.Name, after)
	if took := time.Since(deleted); took >= testDrainTail {
		t.Errorf("the replacement pod's listeners were published %s after its predecessor's DEL, not before the tail's end (%s)", took, testDrainTail)
	}
}
