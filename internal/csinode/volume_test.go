// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package csinode

import (
	"context"
	"errors"
	"io"
	"log"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/aether-mesh/aether-operator/internal/testroot"
)

const (
	testUID   = "0f6c1f4e-8d2b-4a57-9b43-2b1d7c3e9a10"
	testGroup = 65532
)

// node is the plugin serving on sockets in a temp dir, and a CSI client of it (the kubelet's side).
type node struct {
	csi.NodeClient
	csi.IdentityClient
	dir      string // the pods' socket directories
	spire    string // stands in for the node's SPIRE agent socket directory
	kubelet  string // stands in for /var/lib/kubelet
	sockets  Sockets
	served   chan error
	stopping context.CancelFunc
}

func startNode(t *testing.T) *node {
	t.Helper()
	// Short: a unix socket's path must fit 107 bytes, which t.TempDir's (named after the test) may not.
	root, err := os.MkdirTemp("", "csinode")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// What a failed test left mounted (the namespace is the test's own: the host never saw it).
		if table, err := mounts(); err == nil {
			for _, m := range slices.Backward(table) {
				if strings.HasPrefix(m.Point, root+"/") {
					_ = unix.Unmount(m.Point, unix.MNT_DETACH)
				}
			}
		}
		_ = os.RemoveAll(root)
	})
	n := &node{
		dir:     filepath.Join(root, "uds"),
		kubelet: filepath.Join(root, "kubelet"),
		spire:   filepath.Join(root, "spire"),
		served:  make(chan error, 1),
	}
	n.sockets = Sockets{
		CSI:             filepath.Join(n.kubelet, "plugins", DriverName, "csi.sock"),
		RegistrationDir: filepath.Join(n.kubelet, "plugins_registry"),
	}
	srv := &Server{NodeName: "node-a", Volumes: Volumes{Dir: n.dir, Size: DefaultSize}, SPIREAgentSockets: n.spire, Log: log.New(io.Discard, "", 0)}
	ctx, cancel := context.WithCancel(context.Background())
	n.stopping = cancel
	go func() { n.served <- Serve(ctx, srv, n.sockets) }()
	t.Cleanup(func() {
		cancel()
		if err := <-n.served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	conn := dial(t, n.sockets.CSI)
	n.NodeClient, n.IdentityClient = csi.NewNodeClient(conn), csi.NewIdentityClient(conn)
	return n
}

// dial connects to the unix socket at path once it exists (Serve creates it), as the kubelet does.
func dial(t *testing.T, path string) *grpc.ClientConn {
	t.Helper()
	// WaitForReady: the first call waits for the socket rather than fails before Serve listens.
	conn, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.WaitForReady(true)),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", path)
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// publishRequest is what the kubelet v1.37 sends for an inline volume of a pod with fsGroup
// group (none when group is ""), with podInfoOnMount and VOLUME_MOUNT_GROUP.
func publishRequest(target, uid, group string) *csi.NodePublishVolumeRequest {
	return &csi.NodePublishVolumeRequest{
		VolumeId:   "csi-5a8d1f",
		TargetPath: target,
		VolumeCapability: &csi.VolumeCapability{
			AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{VolumeMountGroup: group}},
			AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
		},
		VolumeContext: map[string]string{
			ctxPodUID:                                uid,
			ctxPodName:                               "echo-0",
			ctxPodNamespace:                          "team-a",
			ctxEphemeral:                             "true",
			"csi.storage.k8s.io/serviceAccount.name": "default",
		},
	}
}

// mountsOf returns the mounts of the filesystem mounted at point (itself and its binds).
func mountsOf(t *testing.T, point string) []mount {
	t.Helper()
	table, err := mounts()
	if err != nil {
		t.Fatal(err)
	}
	at, ok := find(table, point)
	if !ok {
		return nil
	}
	var out []mount
	for _, m := range table {
		if m.Dev == at.Dev {
			out = append(out, m)
		}
	}
	return out
}

func TestPublishMountsThePodsTmpfsAndUnpublishRemovesIt(t *testing.T) {
	testroot.Require(t, "mounts tmpfs and binds it")
	n := startNode(t)
	ctx := context.Background()
	// Shorter than the kubelet's pods/<uid>/volumes/kubernetes.io~csi/<name>/mount, so that a
	// socket in it fits a unix address; the plugin takes the target as given.
	target := filepath.Join(n.kubelet, "pods", "a", "uds", "mount")
	if _, err := n.NodePublishVolume(ctx, publishRequest(target, testUID, "65532")); err != nil {
		t.Fatalf("NodePublishVolume: %v", err)
	}
	dir := filepath.Join(n.dir, testUID)

	var st syscall.Stat_t
	if err := syscall.Stat(dir, &st); err != nil {
		t.Fatal(err)
	}
	if st.Uid != 0 || st.Gid != testGroup {
		t.Errorf("%s is owned %d:%d, want 0:%d", dir, st.Uid, st.Gid, testGroup)
	}
	if mode := st.Mode & 0o7777; mode != 0o2770 {
		t.Errorf("%s has mode %#o, want 02770 (setgid, rwx for root and the fsGroup)", dir, mode)
	}

	both := mountsOf(t, dir)
	if len(both) != 2 {
		t.Fatalf("the pod's tmpfs is mounted %d times (%+v), want twice: at %s and bound at %s", len(both), both, dir, target)
	}
	for _, m := range both {
		if m.Point != dir && m.Point != target {
			t.Errorf("the pod's tmpfs is mounted at %s, want only %s and %s", m.Point, dir, target)
		}
		if m.FSType != "tmpfs" || !strings.Contains(m.Super, "size=1024k") {
			t.Errorf("%s is %s (%s), want tmpfs of size=1024k", m.Point, m.FSType, m.Super)
		}
		for _, flag := range []string{"rw", "nosuid", "nodev", "noexec", "nosymfollow"} {
			if !hasOpt(m.Opts, flag) {
				t.Errorf("%s is mounted %s, without %s", m.Point, m.Opts, flag)
			}
		}
	}

	// The app's socket, created through the pod's side, is on the node's side, group fsGroup.
	sock := filepath.Join(target, "app.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatalf("listen on %s: %v", sock, err)
	}
	defer func() { _ = l.Close() }()
	if err := syscall.Stat(filepath.Join(dir, "app.sock"), &st); err != nil {
		t.Fatalf("the socket is not in the node's directory: %v", err)
	}
	if st.Gid != testGroup {
		t.Errorf("the app's socket has group %d, want the fsGroup %d (the directory's setgid bit)", st.Gid, testGroup)
	}

	// The kubelet retries: a second publish changes nothing.
	if _, err := n.NodePublishVolume(ctx, publishRequest(target, testUID, "65532")); err != nil {
		t.Fatalf("NodePublishVolume again: %v", err)
	}
	if again := mountsOf(t, dir); len(again) != 2 {
		t.Errorf("after a second publish the pod's tmpfs is mounted %d times, want 2: %+v", len(again), again)
	}

	// Another volume of the same pod would share the directory: refused.
	other := filepath.Join(filepath.Dir(filepath.Dir(target)), "uds2", "mount")
	_, err = n.NodePublishVolume(ctx, publishRequest(other, testUID, "65532"))
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "one "+DriverName+" volume per pod") {
		t.Errorf("a second volume of the pod: %v, want FailedPrecondition, one volume per pod", err)
	}

	_ = l.Close()
	for i := range 2 { // idempotent: the kubelet retries unpublish too
		if _, err := n.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "csi-5a8d1f", TargetPath: target}); err != nil {
			t.Fatalf("NodeUnpublishVolume #%d: %v", i+1, err)
		}
	}
	table, err := mounts()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range table {
		if strings.HasPrefix(m.Point, n.dir) || strings.HasPrefix(m.Point, n.kubelet+"/pods") {
			t.Errorf("still mounted after unpublish: %s (%s)", m.Point, m.FSType)
		}
	}
	for _, p := range []string{dir, target} {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s is still there after unpublish (%v)", p, err)
		}
	}
}

// TestUnpublishAfterAFailedBind: a publish that mounted the pod's tmpfs and then failed leaves no
// bind on the target; unpublish still finds the tmpfs, through the pod UID in the kubelet's path.
func TestUnpublishAfterAFailedBind(t *testing.T) {
	testroot.Require(t, "mounts tmpfs and binds it")
	n := startNode(t)
	ctx := context.Background()
	target := filepath.Join(n.kubelet, "pods", testUID, "volumes", "kubernetes.io~csi", "uds", "mount")
	if _, err := n.NodePublishVolume(ctx, publishRequest(target, testUID, "65532")); err != nil {
		t.Fatalf("NodePublishVolume: %v", err)
	}
	if err := unix.Unmount(target, 0); err != nil { // as if the bind had failed
		t.Fatal(err)
	}
	dir := filepath.Join(n.dir, testUID)
	if len(mountsOf(t, dir)) != 1 {
		t.Fatalf("want the pod's tmpfs mounted at %s only, before unpublish", dir)
	}
	if _, err := n.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "csi-5a8d1f", TargetPath: target}); err != nil {
		t.Fatalf("NodeUnpublishVolume: %v", err)
	}
	if left := mountsOf(t, dir); len(left) != 0 {
		t.Errorf("the pod's tmpfs is still mounted after unpublish: %+v", left)
	}
	if _, err := os.Lstat(dir); !os.IsNotExist(err) {
		t.Errorf("%s is still there after unpublish (%v)", dir, err)
	}
}

func TestPublishRefusesWhatItCannotServe(t *testing.T) {
	testroot.Require(t, "serves the plugin's sockets under a root-owned temp dir")
	n := startNode(t)
	target := filepath.Join(n.kubelet, "pods", testUID, "volumes", "kubernetes.io~csi", "uds", "mount")

	persistent := publishRequest(target, testUID, "65532")
	delete(persistent.VolumeContext, ctxEphemeral)
	block := publishRequest(target, testUID, "65532")
	block.VolumeCapability.AccessType = &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}}
	noPodInfo := publishRequest(target, "", "65532")
	badUID := publishRequest(target, "../../etc", "65532")

	for _, tc := range []struct {
		name string
		req  *csi.NodePublishVolumeRequest
		code codes.Code
		says string
	}{
		{"no fsGroup", publishRequest(target, testUID, ""), codes.FailedPrecondition, "set spec.securityContext.fsGroup"},
		{"fsGroup not a number", publishRequest(target, testUID, "staff"), codes.InvalidArgument, `volume_mount_group "staff"`},
		{"a persistent volume", persistent, codes.InvalidArgument, "inline ephemeral volumes only"},
		{"a block volume", block, codes.InvalidArgument, "not a block device"},
		{"no pod info", noPodInfo, codes.FailedPrecondition, "podInfoOnMount: true"},
		{"a UID that is a path", badUID, codes.InvalidArgument, `pod.uid "../../etc" is not a Kubernetes UID`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := n.NodePublishVolume(context.Background(), tc.req)
			if status.Code(err) != tc.code || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("NodePublishVolume: %v, want %s saying %q", err, tc.code, tc.says)
			}
			table, err := mounts()
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range table {
				if strings.HasPrefix(m.Point, n.dir) || strings.HasPrefix(m.Point, n.kubelet+"/pods") {
					t.Errorf("a refused publish mounted %s", m.Point)
				}
			}
		})
	}
}

// TestPublishCarriesSPIREsSocketDirectoryReadOnly: a volume with the attribute of SPIRE's agent
// sockets is the node's directory, bound read-only (asked read-write, as a pod may), nosuid,
// nodev, noexec, nosymfollow: its socket answers through the volume, nothing can be written there,
// and unpublishing takes the bind away and leaves the node's directory and socket as they were.
func TestPublishCarriesSPIREsSocketDirectoryReadOnly(t *testing.T) {
	testroot.Require(t, "binds a directory")
	n := startNode(t)
	ctx := context.Background()
	if err := os.Mkdir(n.spire, 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", filepath.Join(n.spire, "spire-agent.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte("workload api"))
			_ = c.Close()
		}
	}()

	target := filepath.Join(n.kubelet, "pods", "a", "spire", "mount")
	req := publishRequest(target, testUID, "") // no fsGroup: the socket is the node's, mode 0777
	req.VolumeContext[VolumeAttribute] = VolumeSPIREAgentSockets
	for range 2 { // the kubelet retries: the second publish changes nothing
		if _, err := n.NodePublishVolume(ctx, req); err != nil {
			t.Fatalf("NodePublishVolume: %v", err)
		}
	}
	table, err := mounts()
	if err != nil {
		t.Fatal(err)
	}
	var at []mount
	for _, m := range table {
		if m.Point == target {
			at = append(at, m)
		}
	}
	if len(at) != 1 {
		t.Fatalf("%s is mounted %d times (%+v), want once", target, len(at), at)
	}
	for _, flag := range []string{"ro", "nosuid", "nodev", "noexec", "nosymfollow"} {
		if !hasOpt(at[0].Opts, flag) {
			t.Errorf("%s is mounted %s, without %s", target, at[0].Opts, flag)
		}
	}
	c, err := net.Dial("unix", filepath.Join(target, "spire-agent.sock"))
	if err != nil {
		t.Fatalf("dialling SPIRE's socket through the volume: %v", err)
	}
	got, _ := io.ReadAll(c)
	_ = c.Close()
	if string(got) != "workload api" {
		t.Errorf("SPIRE's socket through the volume answered %q, want %q", got, "workload api")
	}
	if err := os.WriteFile(filepath.Join(target, "planted"), nil, 0o600); !errors.Is(err, unix.EROFS) {
		t.Errorf("writing into the volume: %v, want EROFS", err)
	}

	if _, err := n.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "csi-5a8d1f", TargetPath: target}); err != nil {
		t.Fatalf("NodeUnpublishVolume: %v", err)
	}
	if table, err = mounts(); err != nil {
		t.Fatal(err)
	}
	if _, ok := find(table, target); ok {
		t.Errorf("%s is still mounted after unpublish", target)
	}
	if _, err := os.Stat(filepath.Join(n.spire, "spire-agent.sock")); err != nil {
		t.Errorf("unpublish took SPIRE's socket from the node: %v", err)
	}
}

// TestPublishRefusesWhatIsNoSPIREDirectory: an attribute the plugin does not know, and SPIRE's
// socket directory not (yet) on the node, are refused with the attribute and the directory
// named, nothing mounted; the kubelet retries the second, as it retried a hostPath of type
// Directory.
func TestPublishRefusesWhatIsNoSPIREDirectory(t *testing.T) {
	testroot.Require(t, "serves the plugin's sockets under a root-owned temp dir")
	n := startNode(t)
	target := filepath.Join(n.kubelet, "pods", "a", "spire", "mount")
	unknown := publishRequest(target, testUID, "")
	unknown.VolumeContext[VolumeAttribute] = "spire-agent-socket"
	missing := publishRequest(target, testUID, "")
	missing.VolumeContext[VolumeAttribute] = VolumeSPIREAgentSockets
	for _, tc := range []struct {
		name string
		req  *csi.NodePublishVolumeRequest
		code codes.Code
		says string
	}{
		{"an unknown attribute", unknown, codes.InvalidArgument, `volumeAttributes aether.io/volume: "spire-agent-socket" is no volume csi.aether.io serves`},
		{"no SPIRE directory on the node", missing, codes.FailedPrecondition, "no such directory on the node: " + n.spire},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := n.NodePublishVolume(context.Background(), tc.req)
			if status.Code(err) != tc.code || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("NodePublishVolume: %v, want %s saying %q", err, tc.code, tc.says)
			}
			table, err := mounts()
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := find(table, target); ok {
				t.Errorf("a refused publish mounted %s", target)
			}
		})
	}
	without := &Server{NodeName: "node-a", Log: log.New(io.Discard, "", 0)}
	if _, err := without.NodePublishVolume(context.Background(), missing); status.Code(err) != codes.FailedPrecondition ||
		!strings.Contains(err.Error(), "runs without --spire-agent-sockets") {
		t.Errorf("a plugin without --spire-agent-sockets: %v, want FailedPrecondition naming the flag", err)
	}
}

func TestUnescapeOctal(t *testing.T) {
	for in, want := range map[string]string{
		`/var/lib/kubelet/pods/a\040b/mount`: "/var/lib/kubelet/pods/a b/mount",
		`/plain`:                             "/plain",
		`/tail\04`:                           `/tail\04`,
		`/back\134slash`:                     `/back\slash`,
	} {
		if got := unescapeOctal(in); got != want {
			t.Errorf("unescapeOctal(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestPublishRefusesAKernelThatIgnoresNosymfollow: NodePublishVolume reads the mount's options
// back. Mounted without nosymfollow, as a kernel before 5.10 does when given MS_NOSYMFOLLOW (it
// ignores a flag it does not know, without an error), the volume is refused with
// FailedPrecondition naming the flag and the kernel, and nothing stays mounted; with the flag,
// the same request is served (the control: this kernel applies it).
func TestPublishRefusesAKernelThatIgnoresNosymfollow(t *testing.T) {
	testroot.Require(t, "mounts tmpfs and binds")
	n := startNode(t)
	target := filepath.Join(n.kubelet, "pods", testUID, "volumes", "kubernetes.io~csi", "uds", "mount")
	flags := mountFlags
	t.Cleanup(func() { mountFlags = flags })
	mountFlags &^= unix.MS_NOSYMFOLLOW

	_, err := n.NodePublishVolume(context.Background(), publishRequest(target, testUID, "65532"))
	t.Logf("without nosymfollow: %v", err)
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "without nosymfollow") || !strings.Contains(err.Error(), "Linux ") {
		t.Errorf("NodePublishVolume on a kernel that ignores nosymfollow: %v, want FailedPrecondition naming nosymfollow and the kernel", err)
	}
	table, err := mounts()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range table {
		if strings.HasPrefix(m.Point, n.dir) || strings.HasPrefix(m.Point, n.kubelet+"/pods") {
			t.Errorf("a refused publish left %s mounted (%s)", m.Point, m.Opts)
		}
	}

	mountFlags = flags
	if _, err := n.NodePublishVolume(context.Background(), publishRequest(target, testUID, "65532")); err != nil {
		t.Fatalf("with nosymfollow: %v", err)
	}
}
