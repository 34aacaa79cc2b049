// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/aether-mesh/aether-operator/internal/agent"
	"github.com/aether-mesh/aether-operator/internal/cni"
	"github.com/aether-mesh/aether-operator/internal/registration"
	"github.com/aether-mesh/aether-operator/internal/testenv"
	"github.com/aether-mesh/aether-operator/internal/testroot"
)

// These tests drive the REAL plugin binary (built once, by TestMain) the way a container runtime
// does: the CNI_* environment, a chained configuration with a prevResult on stdin, the answer on
// stdout and the exit code. Behind it runs the real agent (internal/agent, its manager and caches)
// against a real API server, with its CNI socket in a temporary directory; the pods' network
// namespaces are real ones the tests create.

// testNode is the node of the agent the plugin talks to.
const testNode = "node-cni"

var (
	env *testenv.Env
	// plugin is the built plugin binary.
	plugin string
	// socket is where the agent answers the plugin.
	socket string
	// registry is the agent's network namespace registry.
	registry *agent.NetNS
	// capture is the agent's capture programmer.
	capture = &nsfsProgrammer{programmed: map[types.UID]string{}}
)

func TestMain(m *testing.M) {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	testenv.Run(m, &env, buildPlugin, startAgent)
}

// buildPlugin builds this package's binary, as the image does.
func buildPlugin(*testenv.Env) (func(), error) {
	dir, err := os.MkdirTemp("", "aether-cni-")
	if err != nil {
		return nil, err
	}
	plugin = filepath.Join(dir, cni.PluginType)
	out, err := exec.Command("go", "build", "-o", plugin, ".").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("go build of the plugin: %w\n%s", err, out)
	}
	return func() { _ = os.RemoveAll(dir) }, nil
}

// startAgent runs the agent for testNode, answering the plugin on a socket in a temporary
// directory, with its registry in a state file there and nsfsProgrammer as its capture.
func startAgent(e *testenv.Env) (func(), error) {
	dir, err := os.MkdirTemp("", "aether-agent-")
	if err != nil {
		return nil, err
	}
	socket = filepath.Join(dir, "cni.sock")
	if registry, _, err = agent.OpenNetNS(filepath.Join(dir, "netns.json")); err != nil {
		return nil, err
	}
	listener, err := agent.ListenCNI(socket)
	if err != nil {
		return nil, err
	}
	mgr, err := ctrl.NewManager(e.Config, ctrl.Options{
		Scheme: e.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Cache: agent.CacheOptions(testNode),
	})
	if err != nil {
		return nil, err
	}
	ignored, _ := registration.ParseIgnoredNamespaces(strings.Join(registration.DefaultIgnoredNamespaces, ","))
	if err := agent.Setup(mgr, agent.Options{NodeName: testNode, Health: agent.DefaultHealthOptions, IgnoredNamespaces: ignored,
		CNI: &agent.CNIOptions{Listener: listener, NetNS: registry, Capture: capture}}); err != nil {
		return nil, err
	}
	stop, err := testenv.StartManager(mgr)
	if err != nil {
		return nil, err
	}
	return func() { stop(); _ = os.RemoveAll(dir) }, nil
}

// nsfsProgrammer stands in for internal/capture's applier with a real check of what it is given:
// Program succeeds only on a path that is a namespace (the nsfs file system), and remembers it.
type nsfsProgrammer struct {
	mu         sync.Mutex
	programmed map[types.UID]string
}

func (p *nsfsProgrammer) Program(_ context.Context, pod agent.CapturePod) error {
	var fs unix.Statfs_t
	if err := unix.Statfs(pod.NetNS, &fs); err != nil {
		return err
	}
	if fs.Type != unix.NSFS_MAGIC {
		return fmt.Errorf("%s is not a network namespace (file system magic %#x)", pod.NetNS, fs.Type)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.programmed[pod.Pod.UID] = pod.NetNS
	return nil
}

func (p *nsfsProgrammer) Forget(uid types.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.programmed, uid)
}

func (p *nsfsProgrammer) netns(uid types.UID) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	path, ok := p.programmed[uid]
	return path, ok
}

// newNetNS creates a network namespace and pins it at a file in a temporary directory, as a
// container runtime pins a pod sandbox's.
func newNetNS(t *testing.T) string {
	t.Helper()
	testroot.Require(t, "a network namespace pinned by a bind mount")
	path := filepath.Join(t.TempDir(), "netns")
	if err := os.WriteFile(path, nil, 0o444); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		// Never unlocked: the thread, moved to the new namespace, ends with this goroutine.
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			done <- fmt.Errorf("unshare: %w", err)
			return
		}
		done <- unix.Mount(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()), path, "", unix.MS_BIND, "")
	}()
	if err := <-done; err != nil {
		t.Fatalf("pinning a new network namespace: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(path, unix.MNT_DETACH) })
	return path
}

// bridgeResult is a bridge plugin's result as a runtime passes it on, spaced and ordered its own
// way: the plugin must print exactly these bytes.
const bridgeResult = `{ "cniVersion" : "1.1.0",
   "interfaces": [ {"name": "cni0", "mac": "aa:bb:cc:dd:ee:ff"}, {"mac":"11:22:33:44:55:66", "name":"eth0", "sandbox": "/var/run/netns/cni-x"} ],
   "ips": [{"interface": 1, "address": "10.244.0.7/24", "gateway": "10.244.0.1"}],
   "routes":[{"dst":"0.0.0.0/0"}],   "dns": {} }`

// netConf is the chained configuration the runtime passes the plugin: entry's fields, version
// cniVersion, and prev as the prevResult (none if empty).
func netConf(t *testing.T, cniVersion string, entry cni.Entry, prev string) string {
	t.Helper()
	entry.Type = cni.PluginType
	fields, err := json.Marshal(entry)
	if err != nil {
		t.Fatal(err)
	}
	conf := fmt.Sprintf(`{"cniVersion": %q, "name": "aether", %s`, cniVersion, fields[1:len(fields)-1])
	if prev != "" {
		conf += `, "prevResult": ` + prev
	}
	return conf + "}"
}

// toAgent is the plugin's entry for the running agent.
func toAgent() cni.Entry { return cni.Entry{AgentSocket: socket, Timeout: "10s"} }

// sandbox is one pod sandbox, as the runtime names it to the plugin.
type sandbox struct {
	containerID, netns   string
	namespace, name, uid string
}

func sandboxOf(t *testing.T, pod *corev1.Pod) sandbox {
	return sandbox{containerID: fmt.Sprintf("%x", time.Now().UnixNano()), netns: newNetNS(t),
		namespace: pod.Namespace, name: pod.Name, uid: string(pod.UID)}
}

// result is one run of the plugin.
type result struct {
	stdout, stderr string
	code           int
}

// cniError is the plugin's error on stdout.
func (r result) cniError(t *testing.T) (code uint, msg string) {
	t.Helper()
	var e struct {
		Code uint   `json:"code"`
		Msg  string `json:"msg"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &e); err != nil {
		t.Fatalf("exit %d with stdout %q: not a CNI error (%v)", r.code, r.stdout, err)
	}
	return e.Code, e.Msg
}

// run runs the plugin for command on sb with conf on stdin.
func run(t *testing.T, command string, sb sandbox, conf string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, plugin)
	cmd.Env = []string{
		"CNI_COMMAND=" + command, "CNI_CONTAINERID=" + sb.containerID, "CNI_NETNS=" + sb.netns, "CNI_IFNAME=eth0",
		"CNI_PATH=" + filepath.Dir(plugin),
		fmt.Sprintf("CNI_ARGS=IgnoreUnknown=1;K8S_POD_NAMESPACE=%s;K8S_POD_NAME=%s;K8S_POD_INFRA_CONTAINER_ID=%s;K8S_POD_UID=%s",
			sb.namespace, sb.name, sb.containerID, sb.uid),
	}
	cmd.Stdin = strings.NewReader(conf)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	switch {
	case errors.As(err, &exit):
		r.code = exit.ExitCode()
	case err != nil:
		t.Fatalf("running the plugin: %v", err)
	}
	return r
}

// createPod creates a pod bound to node, labelled aether.io/managed=managed (no label if empty).
func createPod(t *testing.T, ns, name, node, managed string) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}}},
	}
	if managed != "" {
		pod.Labels = map[string]string{registration.LabelManaged: managed}
	}
	if err := env.Client.Create(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	return pod
}

func namespace(t *testing.T) string {
	t.Helper()
	prefix := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	ns, err := env.Namespace(context.Background(), prefix[:min(len(prefix), 40)])
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

// requests is the agent's count of CNI requests of result.
func requests(t *testing.T, result string) float64 {
	t.Helper()
	n, err := testenv.Counter("aether_agent_cni_requests_total", "result", result)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestAddHandsAMeshedPodOverAndPassesThePreviousResultByteForByte is the hand-over: ADD reaches
// the agent, which records the pod's network namespace and programs its capture before the
// plugin returns the previous result unchanged; DEL takes both back, and again, and for a pod
// nobody knows.
func TestAddHandsAMeshedPodOverAndPassesThePreviousResultByteForByte(t *testing.T) {
	ns := namespace(t)
	pod := createPod(t, ns, "payments-0", testNode, "true")
	sb := sandboxOf(t, pod)
	conf := netConf(t, "1.1.0", toAgent(), bridgeResult)
	managedBefore := requests(t, agent.CNIManaged)

	add := run(t, "ADD", sb, conf)
	if add.code != 0 {
		t.Fatalf("ADD exited %d: %s%s", add.code, add.stdout, add.stderr)
	}
	if add.stdout != bridgeResult {
		t.Errorf("ADD printed\n%s\nwant the prevResult byte for byte\n%s", add.stdout, bridgeResult)
	}
	if path, containerID, ok := registry.Sandbox(pod.UID); !ok || path != sb.netns || containerID != sb.containerID {
		t.Errorf("registry: %q from sandbox %q (%v), want %q from %q", path, containerID, ok, sb.netns, sb.containerID)
	}
	if path, ok := capture.netns(pod.UID); !ok || path != sb.netns {
		t.Errorf("capture programmed %q (%v) before ADD returned, want %q", path, ok, sb.netns)
	}
	if got := requests(t, agent.CNIManaged) - managedBefore; got != 1 {
		t.Errorf("the agent counted %v managed requests, want 1", got)
	}

	check := run(t, "CHECK", sb, conf)
	if check.code != 0 {
		t.Errorf("CHECK of the handed-over sandbox exited %d: %s", check.code, check.stdout)
	}

	for i := range 2 { // DEL is idempotent
		del := run(t, "DEL", sb, netConf(t, "1.1.0", toAgent(), ""))
		if del.code != 0 || del.stdout != "" {
			t.Errorf("DEL #%d: exit %d, stdout %q", i+1, del.code, del.stdout)
		}
	}
	if _, _, ok := registry.Sandbox(pod.UID); ok {
		t.Error("the registry still holds the pod after DEL")
	}
	if _, ok := capture.netns(pod.UID); ok {
		t.Error("capture still holds the pod after DEL")
	}
	unknown := sandbox{containerID: "0123456789abcdef", namespace: ns, name: "never-was", uid: "no-such-uid"}
	if del := run(t, "DEL", unknown, netConf(t, "1.1.0", toAgent(), "")); del.code != 0 {
		t.Errorf("DEL of a pod nobody knows: exit %d, %s", del.code, del.stdout)
	}
}

// TestAReplacedSandboxIsNotForgottenByItsPredecessorsDEL: the runtime may delete a pod's old
// sandbox after it added the new one; the old DEL must leave the new namespace recorded.
func TestAReplacedSandboxIsNotForgottenByItsPredecessorsDEL(t *testing.T) {
	pod := createPod(t, namespace(t), "payments-0", testNode, "true")
	old, replacement := sandboxOf(t, pod), sandboxOf(t, pod)
	conf := netConf(t, "1.1.0", toAgent(), bridgeResult)
	for _, sb := range []sandbox{old, replacement} {
		if r := run(t, "ADD", sb, conf); r.code != 0 {
			t.Fatalf("ADD exited %d: %s", r.code, r.stdout)
		}
	}
	if r := run(t, "DEL", old, conf); r.code != 0 {
		t.Fatalf("DEL exited %d: %s", r.code, r.stdout)
	}
	if path, _, ok := registry.Sandbox(pod.UID); !ok || path != replacement.netns {
		t.Errorf("after the old sandbox's DEL the registry holds %q (%v), want the replacement's %q", path, ok, replacement.netns)
	}
	if r := run(t, "CHECK", old, conf); r.code == 0 {
		t.Error("CHECK of the old sandbox passed: the pod's recorded namespace is the replacement's")
	}
	if r := run(t, "DEL", replacement, conf); r.code != 0 {
		t.Fatalf("DEL exited %d: %s", r.code, r.stdout)
	}
	if _, _, ok := registry.Sandbox(pod.UID); ok {
		t.Error("the replacement's DEL left the pod recorded")
	}
}

// TestAddPassesUnmeshedPodsStraightThrough: no label, another value, an ignored namespace (no pod
// there at all: the plugin does not even ask), a pod already gone.
func TestAddPassesUnmeshedPodsStraightThrough(t *testing.T) {
	ns := namespace(t)
	unlabelled := createPod(t, ns, "plain", testNode, "")
	other := createPod(t, ns, "other", testNode, "yes")
	cases := map[string]sandbox{
		"unlabelled":        sandboxOf(t, unlabelled),
		"label not true":    sandboxOf(t, other),
		"ignored namespace": {containerID: "c-ignored", netns: newNetNS(t), namespace: "kube-system", name: "coredns-0", uid: "u-coredns"},
		"gone":              {containerID: "c-gone", netns: newNetNS(t), namespace: ns, name: "gone", uid: "u-gone"},
	}
	conf := netConf(t, "1.1.0", toAgent(), bridgeResult)
	for name, sb := range cases {
		t.Run(name, func(t *testing.T) {
			r := run(t, "ADD", sb, conf)
			if r.code != 0 || r.stdout != bridgeResult {
				t.Errorf("ADD: exit %d, stdout %q; want the prevResult", r.code, r.stdout)
			}
			if _, _, ok := registry.Sandbox(types.UID(sb.uid)); ok {
				t.Error("an unmeshed pod was recorded")
			}
			if r := run(t, "CHECK", sb, conf); r.code != 0 {
				t.Errorf("CHECK: exit %d, %s", r.code, r.stdout)
			}
		})
	}
}

// TestAddFailsWhenTheAgentCannotDoWhatAMeshedPodNeeds: capture that cannot be programmed (a
// CNI_NETNS that is no namespace), and a pod the agent does not serve (bound to another node:
// read from the API server, as no cache of this node holds it), fail the ADD with the agent's
// reason; nothing is recorded.
func TestAddFailsWhenTheAgentCannotDoWhatAMeshedPodNeeds(t *testing.T) {
	ns := namespace(t)
	here := createPod(t, ns, "payments-0", testNode, "true")
	elsewhere := createPod(t, ns, "payments-1", "node-elsewhere", "true")
	notANamespace := filepath.Join(t.TempDir(), "regular-file")
	if err := os.WriteFile(notANamespace, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		sb   sandbox
		want string
	}{
		"capture fails": {sandbox{containerID: "c-here", netns: notANamespace, namespace: ns, name: here.Name, uid: string(here.UID)},
			"is not a network namespace"},
		"another node's pod": {sandboxOf(t, elsewhere), `is bound to node "node-elsewhere", but this agent serves node node-cni`},
	}
	conf := netConf(t, "1.1.0", toAgent(), bridgeResult)
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := run(t, "ADD", tc.sb, conf)
			if r.code == 0 {
				t.Fatalf("ADD passed: %s", r.stdout)
			}
			if code, msg := r.cniError(t); code != 11 || !strings.Contains(msg, tc.want) || !strings.Contains(msg, "the node agent answered 500") {
				t.Errorf("error %d %q, want code 11 (try again later) with the agent's reason %q", code, msg, tc.want)
			}
			if _, _, ok := registry.Sandbox(types.UID(tc.sb.uid)); ok {
				t.Error("a pod whose hand-over failed is recorded")
			}
		})
	}
}

// TestAgentDown is the fail-closed gate: with no agent answering (a stale socket, a socket that
// never answers), the plugin reads the pod itself with its kubeconfig; ADD fails for a meshed pod
// and passes any other. Without a way to read the pod it fails closed, but for ignored
// namespaces. The plugin reads with what the agent gives it: a token of a ServiceAccount bound
// to the shipped plugin role (config/rbac/cni: get pods, nothing else), so that role is proven to
// suffice.
func TestAgentDown(t *testing.T) {
	ns := namespace(t)
	meshed := sandboxOf(t, createPod(t, ns, "payments-0", testNode, "true"))
	plain := sandboxOf(t, createPod(t, ns, "plain", testNode, ""))
	gone := sandbox{containerID: "c-gone", netns: newNetNS(t), namespace: ns, name: "gone", uid: "u-gone"}
	system := sandbox{containerID: "c-sys", netns: newNetNS(t), namespace: "kube-system", name: "coredns-0", uid: "u-coredns"}

	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "cni.kubeconfig")
	if _, err := cni.WriteKubeconfig(kubeconfig, env.Config, pluginToken(t, ns)); err != nil {
		t.Fatal(err)
	}
	revoked := filepath.Join(dir, "revoked.kubeconfig")
	if _, err := cni.WriteKubeconfig(revoked, env.Config, "a-token-that-expired"); err != nil {
		t.Fatal(err)
	}
	sockets := map[string]string{"stale socket": staleSocket(t), "no answer": silentSocket(t)}

	for name, down := range sockets {
		t.Run(name, func(t *testing.T) {
			withKubeconfig := netConf(t, "1.1.0", cni.Entry{AgentSocket: down, Kubeconfig: kubeconfig, Timeout: "1s"}, bridgeResult)
			r := run(t, "ADD", meshed, withKubeconfig)
			if r.code == 0 {
				t.Fatalf("ADD of a meshed pod passed with the agent down: %s", r.stdout)
			}
			if code, msg := r.cniError(t); code != 11 || !strings.Contains(msg, "the node agent is unreachable") ||
				!strings.Contains(msg, "the pod is in the mesh (it is labelled aether.io/managed=true), so it must not start uncaptured") {
				t.Errorf("error %d %q, want code 11 saying the agent is unreachable and the pod is meshed", code, msg)
			}
			if r := run(t, "CHECK", meshed, withKubeconfig); r.code == 0 {
				t.Error("CHECK of a meshed pod passed with the agent down")
			}
			for what, sb := range map[string]sandbox{"unmeshed": plain, "gone": gone, "ignored namespace": system} {
				if r := run(t, "ADD", sb, withKubeconfig); r.code != 0 || r.stdout != bridgeResult {
					t.Errorf("ADD of the %s pod: exit %d, stdout %q; want the prevResult", what, r.code, r.stdout)
				}
			}
			if r := run(t, "DEL", meshed, withKubeconfig); r.code != 0 {
				t.Errorf("DEL with the agent down exited %d: DEL never fails", r.code)
			}

			// No way to tell: fail closed, but for the ignored namespaces.
			for what, entry := range map[string]cni.Entry{
				"no kubeconfig":       {AgentSocket: down, Timeout: "1s"},
				"revoked credentials": {AgentSocket: down, Kubeconfig: revoked, Timeout: "1s"},
			} {
				blind := netConf(t, "1.1.0", entry, bridgeResult)
				if r := run(t, "ADD", plain, blind); r.code == 0 {
					t.Errorf("%s: ADD of a pod whose labels cannot be read passed", what)
				} else if _, msg := r.cniError(t); !strings.Contains(msg, "fail") {
					t.Errorf("%s: error %q does not say it fails closed", what, msg)
				}
				if r := run(t, "ADD", system, blind); r.code != 0 || r.stdout != bridgeResult {
					t.Errorf("%s: ADD in kube-system: exit %d, %s; want it straight through", what, r.code, r.stdout)
				}
			}
		})
	}
}

// staleSocket is a socket file an agent that died left behind: nobody listens.
func staleSocket(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "cni.sock")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	_ = l.Close()
	return path
}

// silentSocket is a socket that accepts connections (the kernel queues them) and never answers:
// a hung agent.
func silentSocket(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "cni.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return path
}

// TestCheck: CHECK fails for a meshed pod whose namespace the agent never recorded, or recorded
// from another path; spec versions before 0.4.0 have no CHECK.
func TestCheck(t *testing.T) {
	pod := createPod(t, namespace(t), "payments-0", testNode, "true")
	sb := sandboxOf(t, pod)
	conf := netConf(t, "1.1.0", toAgent(), bridgeResult)
	if r := run(t, "CHECK", sb, conf); r.code == 0 {
		t.Error("CHECK of a meshed pod never handed over passed")
	} else if _, msg := r.cniError(t); !strings.Contains(msg, "no network namespace of it is recorded") {
		t.Errorf("CHECK error %q, want it to say nothing is recorded", msg)
	}
	if r := run(t, "ADD", sb, conf); r.code != 0 {
		t.Fatalf("ADD exited %d: %s", r.code, r.stdout)
	}
	moved := sb
	moved.netns = newNetNS(t)
	if r := run(t, "CHECK", moved, conf); r.code == 0 {
		t.Error("CHECK with another netns than the recorded one passed")
	}
	if r := run(t, "CHECK", sb, netConf(t, "0.3.1", toAgent(), "")); r.code == 0 {
		t.Error("CHECK of a 0.3.1 configuration passed: CHECK exists from 0.4.0")
	}
	t.Cleanup(func() { run(t, "DEL", sb, conf) })
}

// TestVersionStatusAndGC: VERSION lists every version from 0.1.0 to 1.1.0; STATUS succeeds with
// the agent down (the node's network must not turn NotReady for it), fails with code 50 on a
// configuration that cannot work, and exists from 1.1.0; GC has nothing to collect.
func TestVersionStatusAndGC(t *testing.T) {
	version := run(t, "VERSION", sandbox{}, "")
	var info struct {
		CNIVersion        string   `json:"cniVersion"`
		SupportedVersions []string `json:"supportedVersions"`
	}
	if err := json.Unmarshal([]byte(version.stdout), &info); err != nil || version.code != 0 {
		t.Fatalf("VERSION: exit %d, %q (%v)", version.code, version.stdout, err)
	}
	if got := strings.Join(info.SupportedVersions, ","); got != "0.1.0,0.2.0,0.3.0,0.3.1,0.4.0,1.0.0,1.1.0" {
		t.Errorf("supported versions %s", got)
	}

	down := cni.Entry{AgentSocket: filepath.Join(t.TempDir(), "none.sock")}
	if r := run(t, "STATUS", sandbox{}, netConf(t, "1.1.0", down, "")); r.code != 0 {
		t.Errorf("STATUS with the agent down: exit %d, %s", r.code, r.stdout)
	}
	bad := down
	bad.Timeout = "soon"
	r := run(t, "STATUS", sandbox{}, netConf(t, "1.1.0", bad, ""))
	if code, msg := r.cniError(t); r.code == 0 || code != 50 || !strings.Contains(msg, `timeout "soon" is not a positive Go duration`) {
		t.Errorf("STATUS of a bad configuration: exit %d, error %d %q; want code 50 naming the field", r.code, code, msg)
	}
	if r := run(t, "STATUS", sandbox{}, netConf(t, "1.0.0", down, "")); r.code == 0 {
		t.Error("STATUS of a 1.0.0 configuration passed: STATUS exists from 1.1.0")
	}
	if r := run(t, "GC", sandbox{}, netConf(t, "1.1.0", down, "")); r.code != 0 {
		t.Errorf("GC: exit %d, %s", r.code, r.stdout)
	}
}

// TestPreviousResults: first in a chain the plugin prints an empty result of the configuration's
// version; a prevResult that is no result of that version is refused, naming it.
func TestPreviousResults(t *testing.T) {
	system := sandbox{containerID: "c-sys", netns: newNetNS(t), namespace: "kube-system", name: "coredns-0", uid: "u-coredns"}
	r := run(t, "ADD", system, netConf(t, "1.0.0", toAgent(), ""))
	var empty struct {
		CNIVersion string `json:"cniVersion"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &empty); r.code != 0 || err != nil || empty.CNIVersion != "1.0.0" {
		t.Errorf("first in the chain: exit %d, stdout %q; want an empty 1.0.0 result", r.code, r.stdout)
	}
	r = run(t, "ADD", system, netConf(t, "1.0.0", toAgent(), `{"cniVersion": "1.0.0", "ips": "none"}`))
	if code, msg := r.cniError(t); r.code == 0 || code != 6 || !strings.Contains(msg, "prevResult is not a CNI 1.0.0 result") {
		t.Errorf("a garbled prevResult: exit %d, error %d %q", r.code, code, msg)
	}
}

// pluginToken is a token of a ServiceAccount of ns bound to the shipped plugin ClusterRole
// (config/rbac/cni/role.yaml, applied with the real kubectl).
func pluginToken(t *testing.T, ns string) string {
	t.Helper()
	ctx := context.Background()
	role := filepath.Join(testenv.RepoRoot(), "config", "rbac", "cni", "role.yaml")
	if out, stderr, err := env.Kubectl(ctx, "apply", "-f", role); err != nil {
		t.Fatalf("kubectl apply -f %s: %v\n%s%s", role, err, out, stderr)
	}
	cs := kubernetes.NewForConfigOrDie(env.Config)
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "cni"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: ns + "-cni"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cni-role"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: "cni"}}}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "cni", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}
