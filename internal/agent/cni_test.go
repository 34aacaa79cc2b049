// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"cmp"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aether-mesh/aether-operator/internal/cni"
	"github.com/aether-mesh/aether-operator/internal/testenv"
)

// TestNetNSRegistryOutlivesTheAgent: what the plugin handed over is in the state file; an agent
// that starts reads it back, without the pods whose namespace went while no agent ran.
func TestNetNSRegistryOutlivesTheAgent(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "netns.json")
	stays, goes := filepath.Join(dir, "cni-stays"), filepath.Join(dir, "cni-goes")
	for _, p := range []string{stays, goes} {
		if err := os.WriteFile(p, nil, 0o444); err != nil {
			t.Fatal(err)
		}
	}
	first, dropped, err := OpenNetNS(file)
	if err != nil || len(dropped) != 0 {
		t.Fatalf("a new registry: dropped %v, err %v", dropped, err)
	}
	if err := first.RecordSandbox("uid-stays", "sandbox-1", stays); err != nil {
		t.Fatal(err)
	}
	if err := first.RecordSandbox("uid-goes", "sandbox-2", goes); err != nil {
		t.Fatal(err)
	}
	if info, err := os.Stat(file); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("state file: %v (%v), want mode 0600", info, err)
	}
	if err := os.Remove(goes); err != nil { // its sandbox was deleted while no agent ran
		t.Fatal(err)
	}

	second, dropped, err := OpenNetNS(file)
	if err != nil {
		t.Fatal(err)
	}
	if len(dropped) != 1 || !strings.HasPrefix(dropped[0], "uid-goes ") {
		t.Errorf("dropped %v, want uid-goes", dropped)
	}
	if path, sandbox, ok := second.Sandbox("uid-stays"); !ok || path != stays || sandbox != "sandbox-1" {
		t.Errorf("read back: %q from %q (%v)", path, sandbox, ok)
	}
	if paths := second.Paths(); len(paths) != 1 || paths["uid-stays"] != stays {
		t.Errorf("Paths() = %v, want uid-stays alone", paths)
	}
	if _, _, ok := second.Sandbox("uid-goes"); ok {
		t.Error("a pod whose namespace is gone was read back")
	}
	// The drop is written too: a third agent reads the same.
	if third, dropped, err := OpenNetNS(file); err != nil || len(dropped) != 0 {
		t.Errorf("third open: dropped %v, err %v", dropped, err)
	} else if _, _, ok := third.Sandbox("uid-stays"); !ok {
		t.Error("third open lost uid-stays")
	}

	// Another sandbox's DEL leaves the pod; its own takes it, once.
	if _, forgot := second.ForgetSandbox("uid-stays", "sandbox-0"); forgot {
		t.Error("a DEL of another sandbox forgot the pod")
	}
	if uid, forgot := second.ForgetSandbox("", "sandbox-1"); !forgot || uid != "uid-stays" {
		t.Errorf("a DEL naming only its sandbox: forgot %v %q", forgot, uid)
	}
	if _, forgot := second.ForgetSandbox("uid-stays", "sandbox-1"); forgot {
		t.Error("a second DEL forgot again")
	}
	if after, _, err := OpenNetNS(file); err != nil {
		t.Fatal(err)
	} else if _, _, ok := after.Sandbox("uid-stays"); ok {
		t.Error("the state file still holds a forgotten pod")
	}

	if err := os.WriteFile(file, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := OpenNetNS(file); err == nil || !strings.Contains(err.Error(), "does not parse") {
		t.Errorf("a garbled state file: err %v, want one saying it does not parse", err)
	}
}

// TestListenCNI replaces a stale socket but never a live one, nor anything that is not a socket.
func TestListenCNI(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "run", "cni.sock")
	first, err := ListenCNI(path)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := os.Stat(path); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("socket mode %v (%v), want 0600", info.Mode().Perm(), err)
	}
	if _, err := ListenCNI(path); err == nil || !strings.Contains(err.Error(), "another process serves") {
		t.Errorf("a live socket: err %v, want a refusal", err)
	}
	first.(*net.UnixListener).SetUnlinkOnClose(false)
	_ = first.Close() // an agent that died: its socket file stays
	second, err := ListenCNI(path)
	if err != nil {
		t.Fatalf("a stale socket: %v, want it replaced", err)
	}
	_ = second.Close()
	file := filepath.Join(dir, "not-a-socket")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ListenCNI(file); err == nil || !strings.Contains(err.Error(), "is not a socket") {
		t.Errorf("a regular file: err %v, want a refusal", err)
	}
	if _, err := ListenCNI("cni.sock"); err == nil || !strings.Contains(err.Error(), "not an absolute path") {
		t.Errorf("a relative path: err %v", err)
	}
}

// TestUninstallingTellsAnUninstallFromARestart reads, from the real API server, the agent's pod
// and its DaemonSet: only a DaemonSet deleted or being deleted, with none of its name back within
// the replace window, or credentials revoked, mean the plugin goes (a refusal of the credentials
// themselves, 401, is TestARefusedPodTokenIsNoUninstall's). A DaemonSet deleted and created again
// (kubectl replace --force), before the agent looks or while it waits, is no uninstall.
func TestUninstallingTellsAnUninstallFromARestart(t *testing.T) {
	ctx := testContext(t) // the replace window is 2 s (TestMain)
	ns := namespace(t, ctx)
	daemonSet := func(finalizers ...string) *appsv1.DaemonSet {
		labels := map[string]string{"app": "agent"}
		ds := &appsv1.DaemonSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent", Finalizers: finalizers},
			Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "registry.example/agent:1"}}},
			}},
		}
		return ds
	}
	newDaemonSet := func(finalizers ...string) *appsv1.DaemonSet {
		ds := daemonSet(finalizers...)
		if err := env.Client.Create(ctx, ds); err != nil {
			t.Fatal(err)
		}
		return ds
	}
	ds := newDaemonSet("test.aether.io/hold")
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent-x1", OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "apps/v1", Kind: "DaemonSet", Name: ds.Name, UID: ds.UID, Controller: new(true)}}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "registry.example/agent:1"}}},
	}
	loose := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "loose"}, Spec: pod.Spec}
	for _, p := range []*corev1.Pod{pod, loose} {
		if err := env.Client.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	expect := func(key client.ObjectKey, reader client.Reader, want bool, because string) {
		t.Helper()
		got, why, err := Uninstalling(ctx, Self{Pod: key}, reader, nil)
		if err != nil || got != want || !strings.Contains(why, because) {
			t.Errorf("Uninstalling(%s) = %v, %q, %v; want %v because %q", key, got, why, err, want, because)
		}
	}
	key := client.ObjectKeyFromObject(pod)

	expect(key, env.Client, false, "stays: the agent restarts or is upgraded")
	expect(client.ObjectKeyFromObject(loose), env.Client, false, "is not a DaemonSet's")

	if err := env.Client.Delete(ctx, ds); err != nil { // held by its finalizer: being deleted
		t.Fatal(err)
	}
	expect(key, env.Client, true, "is being deleted, and none of its name came back within 2s")

	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ds), ds); err != nil {
		t.Fatal(err)
	}
	ds.Finalizers = nil
	if err := env.Client.Update(ctx, ds); err != nil { // gone
		t.Fatal(err)
	}
	testenv.EventuallyGone(t, env.Client, ds)
	expect(key, env.Client, true, "is deleted, and none of its name came back within 2s")

	// Created again while the agent waits (once it has read the DaemonSet and found none): a
	// replacement, whose agent takes over.
	looked := &dsReads{Reader: env.Client, read: make(chan struct{}, 1)}
	created := make(chan error, 1)
	go func() {
		<-looked.read
		created <- env.Client.Create(ctx, daemonSet())
	}()
	expect(key, looked, false, "was replaced (deleted and created again")
	if err := <-created; err != nil {
		t.Fatal(err)
	}
	// Created again before the agent looks.
	expect(key, env.Client, false, "was replaced (deleted and created again")

	nobody, err := env.ClientAs("nobody", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	expect(key, nobody, true, "its credentials are revoked")

	if _, _, err := Uninstalling(ctx, Self{Pod: types.NamespacedName{Namespace: ns, Name: "no-such-pod"}}, env.Client, nil); err == nil {
		t.Error("the agent's own pod not found: no error; it cannot tell, and must say so")
	}
}

// TestCNIKeeperPutsThePluginBack runs the agent's keeper on a node's CNI directories in a
// temporary directory: it installs what is missing and puts the entry back after the primary CNI rewrites its conflist without it.
func TestCNIKeeperPutsThePluginBack(t *testing.T) {
	root := t.TempDir()
	in := cni.Installer{BinDir: filepath.Join(root, "bin"), ConfDir: filepath.Join(root, "net.d"), Binary: filepath.Join(root, "aether-cni"),
		Entry: cni.Entry{Type: cni.PluginType, AgentSocket: "/var/run/aether/cni/cni.sock"}}
	primary := `{"cniVersion":"1.0.0","name":"n","plugins":[{"type":"bridge"}]}`
	for _, d := range []string{in.BinDir, in.ConfDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	conflist := filepath.Join(in.ConfDir, "10-n.conflist")
	for path, data := range map[string]string{in.Binary: "plugin", conflist: primary} {
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	keeper := &cniKeeper{opts: CNIInstallOptions{Installer: in, Interval: 50 * time.Millisecond},
		log: ctrl.Log.WithName("keeper-test")}
	go func() { stopped <- keeper.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-stopped; err != nil {
			t.Error(err)
		}
	}()

	installed := func() error {
		if ok, err := in.Installed(); err != nil || !ok {
			return cmp.Or(err, errors.New("not installed"))
		}
		return nil
	}
	testenv.Eventually(t, "the keeper installs the plugin", installed)
	if err := os.WriteFile(conflist, []byte(primary), 0o644); err != nil { // the primary CNI rewrote it
		t.Fatal(err)
	}
	testenv.Eventually(t, "the keeper puts the plugin back", installed)
}

// dsReads is a reader that tells, on read, each time a DaemonSet was read (dropped when nobody
// listens).
type dsReads struct {
	client.Reader
	read chan struct{}
}

func (r *dsReads) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	err := r.Reader.Get(ctx, key, obj, opts...)
	if _, ok := obj.(*appsv1.DaemonSet); ok {
		select {
		case r.read <- struct{}{}:
		default:
		}
	}
	return err
}
