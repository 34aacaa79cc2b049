//go:build e2e

// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package cluster

import (
	"bufio"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The CSI node plugin csi.aether.io (config/csi) on a real kubelet: it registered itself, and a
// pod's inline volume is a tmpfs of its own on the node, root:<fsGroup> 2770, where a nonroot app
// creates its socket and the node reaches it; the pod's deletion takes it all away.
var _ = Describe("csi.aether.io, the socket directories' CSI plugin", Ordered, func() {
	const (
		ns      = "csi-uds"
		fsGroup = 3000
		appUser = 1000
	)
	ctx := context.Background()

	// udsPod is a nonroot app serving on /run/app/app.sock in its csi.aether.io volume.
	udsPod := func(name string, fsGroup *int64) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: corev1.PodSpec{
				SecurityContext: &corev1.PodSecurityContext{
					RunAsUser: ptr.To[int64](appUser), RunAsGroup: ptr.To[int64](appUser), RunAsNonRoot: new(true),
					FSGroup: fsGroup,
				},
				TerminationGracePeriodSeconds: ptr.To[int64](1),
				Containers: []corev1.Container{{
					Name: "app", Image: "docker.io/aether/testserver:dev", ImagePullPolicy: corev1.PullNever,
					Args:         []string{"-uds", "/run/app/app.sock"},
					VolumeMounts: []corev1.VolumeMount{{Name: "uds", MountPath: "/run/app"}},
				}},
				Volumes: []corev1.Volume{{Name: "uds", VolumeSource: corev1.VolumeSource{
					CSI: &corev1.CSIVolumeSource{Driver: "csi.aether.io"},
				}}},
			},
		}
	}

	BeforeAll(func() { freshNamespace(ctx, ns) })

	It("is registered with the node's kubelet", func() {
		Eventually(func(g Gomega) {
			var nodes storagev1.CSINodeList
			g.Expect(k8s.List(ctx, &nodes)).To(Succeed())
			g.Expect(nodes.Items).NotTo(BeEmpty())
			var drivers []string
			for _, d := range nodes.Items[0].Spec.Drivers {
				drivers = append(drivers, d.Name+"@"+d.NodeID)
			}
			g.Expect(drivers).To(ContainElement("csi.aether.io@"+nodes.Items[0].Name),
				"the kubelet records a registered driver in its CSINode, with the node ID NodeGetInfo gave")
		}, time.Minute, time.Second).Should(Succeed())
	})

	It("gives a pod a tmpfs owned by its fsGroup, where the app's socket is reached from the node, and takes it away with the pod", func() {
		pod := udsPod("app", ptr.To[int64](fsGroup))
		Expect(k8s.Create(ctx, pod)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
			g.Expect(pod.Status.Phase).To(Equal(corev1.PodRunning), "the pod's FailedMount events: %v", failedMounts(ctx, ns, pod.Name))
		}, 2*time.Minute, time.Second).Should(Succeed())
		dir := filepath.Join("/run/aether/uds", string(pod.UID))
		target := filepath.Join("/var/lib/kubelet/pods", string(pod.UID), "volumes", "kubernetes.io~csi", "uds", "mount")

		By("the directory: root:fsGroup, mode 2770")
		var st syscall.Stat_t
		Expect(syscall.Stat(dir, &st)).To(Succeed())
		Expect([]uint32{st.Uid, st.Gid}).To(Equal([]uint32{0, fsGroup}), "owner of %s", dir)
		Expect(st.Mode&0o7777).To(Equal(uint32(0o2770)), "mode of %s", dir)

		By("a tmpfs of 1 MiB, nosuid,nodev,noexec,nosymfollow, bound onto the volume's target path")
		tmpfs, bind := hostMount(dir), hostMount(target)
		Expect(tmpfs).NotTo(BeNil(), "no mount at %s", dir)
		Expect(bind).NotTo(BeNil(), "no mount at %s", target)
		Expect(bind.dev).To(Equal(tmpfs.dev), "the volume's target is not the pod's tmpfs")
		for _, m := range []*hostMountEntry{tmpfs, bind} {
			Expect(m.fsType).To(Equal("tmpfs"), m.line)
			Expect(strings.Split(m.super, ",")).To(ContainElement("size=1024k"), m.line)
			Expect(strings.Split(m.opts, ",")).To(ContainElements("nosuid", "nodev", "noexec", "nosymfollow"), m.line)
		}

		By("the nonroot app created its socket there, group fsGroup by the setgid bit, and the node dials it")
		sock := filepath.Join(dir, "app.sock")
		Eventually(func() error { return syscall.Stat(sock, &st) }, time.Minute, 200*time.Millisecond).Should(Succeed())
		Expect(st.Mode & syscall.S_IFMT).To(Equal(uint32(syscall.S_IFSOCK)))
		Expect([]uint32{st.Uid, st.Gid}).To(Equal([]uint32{appUser, fsGroup}), "owner of %s", sock)
		conn, err := net.DialTimeout("unix", sock, 5*time.Second)
		Expect(err).NotTo(HaveOccurred())
		answer, err := bufio.NewReader(conn).ReadString('\n')
		_ = conn.Close()
		Expect(err).NotTo(HaveOccurred())
		Expect(answer).To(Equal("uds /run/app/app.sock\n"))

		By("deleting the pod unmounts the tmpfs and the bind and removes the directory")
		Expect(k8s.Delete(ctx, pod)).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{}))
		}, 2*time.Minute, time.Second).Should(BeTrue())
		Eventually(func() []string { return hostMountsUnder(dir, target) }, time.Minute, time.Second).Should(BeEmpty())
		Eventually(func() bool { _, err := os.Lstat(dir); return os.IsNotExist(err) }, time.Minute, time.Second).Should(BeTrue(),
			"%s is still there", dir)
	})

	It("refuses a pod without an fsGroup, naming the fix", func() {
		pod := udsPod("no-fsgroup", nil)
		if err := k8s.Create(ctx, pod); err != nil {
			// Admission may deny it first (the pod webhook's own check); then it names the fix.
			Expect(err.Error()).To(ContainSubstring("fsGroup"))
			return
		}
		Eventually(func() []string { return failedMounts(ctx, ns, pod.Name) }, 2*time.Minute, time.Second).
			Should(ContainElement(ContainSubstring("set spec.securityContext.fsGroup")))
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
		Expect(pod.Status.Phase).To(Equal(corev1.PodPending))
		_, err := os.Lstat(filepath.Join("/run/aether/uds", string(pod.UID)))
		Expect(os.IsNotExist(err)).To(BeTrue(), "a refused pod got a socket directory (%v)", err)
		Expect(k8s.Delete(ctx, pod)).To(Succeed())
	})
})

// failedMounts lists the messages of the FailedMount events of pod ns/name.
func failedMounts(ctx context.Context, ns, name string) []string {
	var events corev1.EventList
	if err := k8s.List(ctx, &events, client.InNamespace(ns)); err != nil {
		return []string{"listing events: " + err.Error()}
	}
	var failed []string
	for _, e := range events.Items {
		if e.InvolvedObject.Name == name && e.Reason == "FailedMount" {
			failed = append(failed, e.Message)
		}
	}
	return failed
}

// hostMountEntry is a line of the node's /proc/self/mountinfo (the spec runs in the node's mount
// namespace).
type hostMountEntry struct{ dev, point, opts, fsType, super, line string }

// hostMount is the topmost mount at point on the node, or nil.
func hostMount(point string) *hostMountEntry {
	GinkgoHelper()
	var found *hostMountEntry
	for _, m := range hostMounts() {
		if m.point == point {
			found = &m
		}
	}
	return found
}

// hostMountsUnder lists the node's mount points at or under any of dirs.
func hostMountsUnder(dirs ...string) []string {
	GinkgoHelper()
	var out []string
	for _, m := range hostMounts() {
		for _, d := range dirs {
			if m.point == d || strings.HasPrefix(m.point, d+"/") {
				out = append(out, m.point)
			}
		}
	}
	return out
}

func hostMounts() []hostMountEntry {
	GinkgoHelper()
	data, err := os.ReadFile("/proc/self/mountinfo")
	Expect(err).NotTo(HaveOccurred())
	var out []hostMountEntry
	for line := range strings.SplitSeq(strings.TrimSpace(string(data)), "\n") {
		f := strings.Fields(line)
		sep := -1
		for i := 6; i < len(f); i++ {
			if f[i] == "-" {
				sep = i
				break
			}
		}
		Expect(sep).To(BeNumerically(">", 0), "mountinfo line %q", line)
		out = append(out, hostMountEntry{dev: f[2], point: f[4], opts: f[5], fsType: f[sep+1], super: strings.Join(f[sep+3:], " "), line: line})
	}
	return out
}
