//go:build e2e

// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package cluster

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aether-mesh/aether-operator/internal/testenv"
	"github.com/aether-mesh/aether-operator/internal/xdsserver"
)

// What the fault specs do to the node itself: they run on it (in its network namespace, on its
// file system and in its PID namespace, as make test-e2e runs them), as an operator on the node
// would: restart a control-plane process, kill a container's process, talk to etcd.

// clusterState is the cluster's state directory (hack/cluster's AETHER_CLUSTER_DIR).
func clusterState() string {
	if state := os.Getenv("AETHER_CLUSTER_DIR"); state != "" {
		return state
	}
	return "/tmp/aether-cluster"
}

// restartComponent runs hack/cluster/restart.sh with args (options, then the component): by
// default stops the component with SIGTERM, its graceful stop (--kill: SIGKILL, a crash), and
// starts it again with up.sh's command line (--stop, --start: only that). It returns how long
// that took as the script measured it: from the stop to serving again.
func restartComponent(args ...string) time.Duration {
	GinkgoHelper()
	cmd := exec.Command(filepath.Join(testenv.RepoRoot(), "hack", "cluster", "restart.sh"), args...)
	cmd.Dir = testenv.RepoRoot()
	var stderr bytes.Buffer
	cmd.Stderr = io.MultiWriter(&stderr, GinkgoWriter)
	out, err := cmd.Output()
	Expect(err).NotTo(HaveOccurred(), "hack/cluster/restart.sh %s: %s", strings.Join(args, " "), stderr.String())
	fields := strings.Fields(string(out))
	Expect(fields).NotTo(BeEmpty(), "hack/cluster/restart.sh %s printed nothing", strings.Join(args, " "))
	ms, err := strconv.Atoi(fields[len(fields)-1])
	Expect(err).NotTo(HaveOccurred(), "hack/cluster/restart.sh %s: its last line is a duration in ms: %q", strings.Join(args, " "), out)
	return time.Duration(ms) * time.Millisecond
}

// ctr runs the node's containerd client (hack/cluster/build-runtime.sh's ctr) in its k8s.io
// namespace, the kubelet's.
func ctr(args ...string) string {
	GinkgoHelper()
	build := exec.Command(filepath.Join(testenv.RepoRoot(), "hack", "cluster", "build-runtime.sh"))
	build.Dir = testenv.RepoRoot()
	dirs, err := build.Output()
	Expect(err).NotTo(HaveOccurred(), "hack/cluster/build-runtime.sh")
	lines := strings.Split(strings.TrimSpace(string(dirs)), "\n") // the directory is the last line
	runtimeDir := lines[len(lines)-1]
	out, err := exec.Command(filepath.Join(runtimeDir, "ctr"), append([]string{"--address", "/run/containerd/containerd.sock", "-n", "k8s.io"}, args...)...).CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "ctr %s: %s", strings.Join(args, " "), out)
	return string(out)
}

// containerPID is the host PID of the main process of pod's running container name, from its
// containerd task.
func containerPID(pod *corev1.Pod, name string) int {
	GinkgoHelper()
	var id string
	for _, s := range pod.Status.ContainerStatuses {
		if s.Name == name && s.State.Running != nil {
			id = strings.TrimPrefix(s.ContainerID, "containerd://")
		}
	}
	Expect(id).NotTo(BeEmpty(), "pod %s/%s has no running container %s", pod.Namespace, pod.Name, name)
	tasks := bufio.NewScanner(strings.NewReader(ctr("task", "ls")))
	for tasks.Scan() {
		if f := strings.Fields(tasks.Text()); len(f) >= 3 && f[0] == id && f[2] == "RUNNING" {
			pid, err := strconv.Atoi(f[1])
			Expect(err).NotTo(HaveOccurred())
			return pid
		}
	}
	Fail(fmt.Sprintf("containerd runs no task %s (container %s of pod %s/%s)", id, name, pod.Namespace, pod.Name))
	return 0
}

// killContainer kills the main process of pod's container name with SIGKILL, kill -9 of its
// host PID: no signal handler runs, nothing is released (an OOM kill, a crash). The kubelet
// then restarts the container in the same pod. It returns when the signal was sent.
func killContainer(pod *corev1.Pod, name string) time.Time {
	GinkgoHelper()
	pid := containerPID(pod, name)
	at := time.Now()
	Expect(syscall.Kill(pid, syscall.SIGKILL)).To(Succeed(), "kill -9 %d (container %s of pod %s/%s)", pid, name, pod.Namespace, pod.Name)
	GinkgoWriter.Printf("kill -9 %d: container %s of pod %s/%s\n", pid, name, pod.Namespace, pod.Name)
	return at
}

// etcdGateway is etcd's JSON gateway to its v3 API (hack/cluster/lib.sh: etcd listens on the
// node's loopback).
const etcdGateway = "http://127.0.0.1:2379/v3"

// etcdCall posts body to the gateway's path and decodes the answer into out.
func etcdCall(path string, body, out any) {
	GinkgoHelper()
	data, err := json.Marshal(body)
	Expect(err).NotTo(HaveOccurred())
	resp, err := http.Post(etcdGateway+path, "application/json", bytes.NewReader(data))
	Expect(err).NotTo(HaveOccurred(), "etcd %s", path)
	defer func() { _ = resp.Body.Close() }()
	answer, err := io.ReadAll(resp.Body)
	Expect(err).NotTo(HaveOccurred())
	Expect(resp.StatusCode).To(Equal(http.StatusOK), "etcd %s: %s", path, answer)
	Expect(json.Unmarshal(answer, out)).To(Succeed(), "etcd %s: %s", path, answer)
}

// etcdRevision is etcd's revision in the header of an answer.
type etcdRevision struct {
	Header struct {
		Revision string `json:"revision"`
	} `json:"header"`
}

// compactEtcd moves etcd's revision on by two (two writes of a key of its own, outside the API
// server's /registry), then compacts its history up to that revision (physically: gone when it
// returns), and returns it. Run while the API server is down, every client's last
// resourceVersion is then at least two revisions older: a watch resumed from it (from the
// revision after it) is answered 410 Gone, too old a resourceVersion, by etcd as by a watch
// cache that starts after it.
func compactEtcd() int64 {
	GinkgoHelper()
	var put etcdRevision
	for range 2 {
		etcdCall("/kv/put", map[string]any{"key": base64.StdEncoding.EncodeToString([]byte("/aether-faults/compaction")),
			"value": base64.StdEncoding.EncodeToString([]byte(time.Now().String()))}, &put)
	}
	revision, err := strconv.ParseInt(put.Header.Revision, 10, 64)
	Expect(err).NotTo(HaveOccurred(), "etcd's revision %q", put.Header.Revision)
	var compacted struct{}
	etcdCall("/kv/compaction", map[string]any{"revision": strconv.FormatInt(revision, 10), "physical": true}, &compacted)
	return revision
}

// nodeIP is the node's InternalIP (the agent's metrics listen there: it is on the host network).
func nodeIP() string {
	GinkgoHelper()
	node := &corev1.Node{}
	Expect(k8s.Get(context.Background(), client.ObjectKey{Name: "node-a"}, node)).To(Succeed())
	for _, a := range node.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return a.Address
		}
	}
	Fail("node-a has no InternalIP")
	return ""
}

// metricsScraper is the ServiceAccount the specs scrape the agent's metrics as: bound to the
// shipped metrics-reader ClusterRole, as a Prometheus would be.
const metricsScraper = "e2e-metrics-scraper"

// scraperToken is a token of metricsScraper, created (with its binding) on first use.
var scraperToken = sync.OnceValue(func() string {
	ctx := context.Background()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNamespace, Name: metricsScraper}}
	if err := k8s.Create(ctx, sa); err != nil && !apierrors.IsAlreadyExists(err) {
		Fail(fmt.Sprintf("creating ServiceAccount %s: %v", metricsScraper, err))
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: metricsScraper},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "aether-operator-metrics-reader"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: operatorNamespace, Name: metricsScraper}}}
	if err := k8s.Create(ctx, binding); err != nil && !apierrors.IsAlreadyExists(err) {
		Fail(fmt.Sprintf("creating ClusterRoleBinding %s: %v", metricsScraper, err))
	}
	return accountToken(metricsScraper, nil)
})

// scrapeAgent reads the agent's metrics endpoint on node address ip (host network, port 19090):
// HTTPS with a self-signed certificate (nothing here checks it: the scrape's authority is the
// token), as metricsScraper.
func scrapeAgent(g Gomega, ip string) []byte {
	req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("https://%s:19090/metrics", ip), nil)
	g.Expect(err).NotTo(HaveOccurred())
	req.Header.Set("Authorization", "Bearer "+scraperToken())
	insecure := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := insecure.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK), "the agent's metrics: %s", body)
	return body
}

// agentMetric sums the samples of the agent's metric name (from its metrics endpoint, port
// 19090 on the node) whose labels match labels (a regular expression over the text between
// the braces; "" matches all). A metric the agent does not export fails.
func agentMetric(g Gomega, name, labels string) float64 {
	sum, exported := agentSum(g, name, labels)
	g.Expect(exported).To(BeTrue(), "the agent exports no %s", name)
	return sum
}

// agentSum is agentMetric's sum, and whether the agent exports name at all: a counter vector
// has no sample before its first increment, which reads 0.
func agentSum(g Gomega, name, labels string) (float64, bool) {
	series := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `(?:\{([^}]*)\})? (\S+)$`)
	match := regexp.MustCompile(labels)
	body := scrapeAgent(g, nodeIP())
	samples := series.FindAllSubmatch(body, -1)
	var sum float64
	for _, s := range samples {
		if !match.Match(s[1]) {
			continue
		}
		v, err := strconv.ParseFloat(string(s[2]), 64)
		g.Expect(err).NotTo(HaveOccurred())
		sum += v
	}
	return sum, len(samples) > 0
}

// xdsSocket is the address of the agent's xDS socket as the node sees it: where the agent's
// --xds-address puts it inside its container (xdsserver.DefaultAddress, in its pod's emptyDir
// xds-socket, config/agent; with the node's Envoy, config/envoy, the host directory
// /var/run/aether/proxy, which Envoy's pods mount too), found on the node through the container's
// volume mounts (this process runs on the host's file system, in the node's network namespace),
// and dialled through a short symbolic link to its directory, as a kubelet volume's path is longer
// than a unix socket address may be (108 bytes).
func xdsSocket(agent *corev1.Pod) string {
	GinkgoHelper()
	dir, name := agentSocketOnNode(agent)
	short, err := os.MkdirTemp("", "xds")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(os.RemoveAll, short)
	Expect(os.Symlink(dir, filepath.Join(short, "d"))).To(Succeed())
	return "unix://" + filepath.Join(short, "d", name)
}

// agentSocketOnNode is the node's directory holding the agent container's --xds-address socket,
// and the socket's name: the volume mounted at the longest prefix of its path, a hostPath (its
// path on the node) or an emptyDir (under the kubelet's pod directory).
func agentSocketOnNode(agent *corev1.Pod) (dir, name string) {
	GinkgoHelper()
	var c *corev1.Container
	for i := range agent.Spec.Containers {
		if agent.Spec.Containers[i].Name == "agent" {
			c = &agent.Spec.Containers[i]
		}
	}
	Expect(c).NotTo(BeNil(), "pod %s has no container agent", agent.Name)
	socket := strings.TrimPrefix(xdsserver.DefaultAddress, "unix://")
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, "--xds-address="); ok {
			Expect(v).To(HavePrefix("unix://"), "the agent's --xds-address")
			socket = strings.TrimPrefix(v, "unix://")
		}
	}
	var mount *corev1.VolumeMount
	for i, m := range c.VolumeMounts {
		if strings.HasPrefix(filepath.Dir(socket)+"/", strings.TrimSuffix(m.MountPath, "/")+"/") && (mount == nil || len(m.MountPath) > len(mount.MountPath)) {
			mount = &c.VolumeMounts[i]
		}
	}
	Expect(mount).NotTo(BeNil(), "no volume of the agent's holds its xDS socket %s", socket)
	rest, _ := filepath.Rel(mount.MountPath, filepath.Dir(socket))
	for _, v := range agent.Spec.Volumes {
		switch {
		case v.Name != mount.Name:
		case v.HostPath != nil:
			return filepath.Join(v.HostPath.Path, rest), filepath.Base(socket)
		case v.EmptyDir != nil:
			return filepath.Join("/var/lib/kubelet/pods", string(agent.UID), "volumes", "kubernetes.io~empty-dir", v.Name, rest), filepath.Base(socket)
		}
	}
	Fail(fmt.Sprintf("the agent's volume %s, which holds its xDS socket %s, is neither a hostPath nor an emptyDir", mount.Name, socket))
	return "", ""
}
