// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Command cni is aether-cni, the mesh's chained CNI plugin (CNI spec 1.1, and every earlier
// version from 0.1.0): the last plugin of the node's conflist, it hands each pod to the node agent
// and passes the previous plugin's result through unchanged, byte for byte. It sets up no
// networking itself.
//
// ADD sends the agent (internal/cni's protocol, on its unix socket) the pod's namespace, name and
// UID (CNI_ARGS' K8S_POD_*), its sandbox's container ID and its network namespace (CNI_NETNS).
// The agent decides whether the pod is in the mesh (label aether.io/managed=true, outside the
// ignored namespaces: it knows the pod) and, if so, records the namespace and programs the pod's
// capture before it answers. The ADD fails when the agent says it could not, so no meshed pod
// starts uncaptured; the kubelet retries.
//
// When the agent cannot be reached (not running, restarting, upgraded), the plugin must still tell
// a meshed pod, whose ADD must fail, from any other, whose ADD must not wait for the mesh. The
// runtime passes no labels (CNI_ARGS carries the pod's name; containerd can pass annotations, not
// labels, and CRI-O neither), so the plugin reads the pod from the API server, as Istio's does,
// with the kubeconfig the agent keeps for it (a token of the plugin's own ServiceAccount, which may
// only get pods, renewed by the agent; 0600 in the agent's run directory on the host). Unlike
// Istio's, it reads only then: with the agent up, a pod's start costs the API server nothing
// more. If it cannot read the pod either (a token no agent renewed for an hour, an API server it
// cannot reach), it fails closed, but for namespaces the
// mesh never takes (ignoredNamespaces: kube-system and the like), which pass straight through
// without a word to anyone, so the cluster's own pods never wait for the mesh.
//
// DEL tells the agent to forget the pod's sandbox; it never fails (an unknown pod, an agent
// down: the sandbox is going anyway). CHECK asks the agent whether a meshed pod is recorded from
// this sandbox, and fails like ADD when the agent is unreachable. STATUS succeeds whenever the
// configuration is valid, even with the agent down: a failed STATUS makes the runtime report the
// node's network not ready, and the node then takes no pod at all (and, after five minutes, loses
// those it runs) — but with the agent down the plugin still serves every ADD of a pod outside the
// mesh. VERSION reports every version from 0.1.0 to 1.1.0. GC has nothing to collect (the agent
// forgets sandboxes on DEL and drops namespaces that are gone when it starts).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/aether-mesh/aether-operator/internal/cni"
	aetherversion "github.com/aether-mesh/aether-operator/internal/version"
)

// errPluginNotAvailable is STATUS's "cannot service ADD requests" (CNI spec 1.1).
const errPluginNotAvailable uint = 50

func main() {
	// The container runtime calls the plugin with CNI_COMMAND set and no arguments; --version is
	// for people (CNI's own VERSION command reports the spec versions it supports instead).
	if len(os.Args) == 2 && (os.Args[1] == "--version" || os.Args[1] == "-version") {
		fmt.Println(aetherversion.Line("aether-cni"))
		return
	}
	skel.PluginMainFuncs(skel.CNIFuncs{Add: cmdAdd, Del: cmdDel, Check: cmdCheck, Status: cmdStatus},
		version.All, "aether-cni: hands each pod to the Aether mesh's node agent (a chained plugin, last in the conflist)")
}

// call is one CNI call: its configuration and the pod it is for.
type call struct {
	conf     cni.PluginConf
	settings cni.Settings
	request  cni.Request
	// kubernetes is false when CNI_ARGS names no pod: not a Kubernetes sandbox, nothing to do.
	kubernetes bool
}

// parse reads a CNI call.
func parse(args *skel.CmdArgs) (call, error) {
	conf, settings, err := cni.ParseConf(args.StdinData)
	if err != nil {
		return call{}, types.NewError(types.ErrInvalidNetworkConfig, err.Error(), "")
	}
	k8s := cniArgs(args.Args)
	req := cni.Request{ContainerID: args.ContainerID, NetNS: args.Netns, IfName: args.IfName,
		Namespace: k8s["K8S_POD_NAMESPACE"], Name: k8s["K8S_POD_NAME"], UID: k8s["K8S_POD_UID"]}
	return call{conf: conf, settings: settings, request: req, kubernetes: req.Namespace != "" && req.Name != ""}, nil
}

// cniArgs reads CNI_ARGS ("K1=V1;K2=V2"). By hand rather than types.LoadArgs, which refuses keys
// it was not told of unless the runtime adds IgnoreUnknown.
func cniArgs(s string) map[string]string {
	out := map[string]string{}
	for pair := range strings.SplitSeq(s, ";") {
		if k, v, ok := strings.Cut(pair, "="); ok {
			out[k] = v
		}
	}
	return out
}

// passesStraight reports whether the call concerns no pod the mesh could take.
func (c call) passesStraight() bool {
	return !c.kubernetes || c.settings.Ignored.Ignores(c.request.Namespace)
}

func cmdAdd(args *skel.CmdArgs) error {
	c, err := parse(args)
	if err != nil {
		return err
	}
	result, err := prevResult(c.conf)
	if err != nil {
		return err
	}
	if !c.passesStraight() {
		if err := c.handOver(cni.PathAdd); err != nil {
			return err
		}
	}
	_, err = os.Stdout.Write(result)
	return err
}

func cmdCheck(args *skel.CmdArgs) error {
	c, err := parse(args)
	if err != nil {
		return err
	}
	if _, err := prevResult(c.conf); err != nil {
		return err
	}
	if c.passesStraight() {
		return nil
	}
	return c.handOver(cni.PathCheck)
}

// cmdDel never fails: the sandbox goes whatever the agent knew of it, and a failed DEL would keep
// the pod terminating. What could not be told is said on stderr (the runtime's log).
func cmdDel(args *skel.CmdArgs) error {
	c, err := parse(args)
	if err != nil {
		logf("DEL of sandbox %s: %v; nothing to forget", args.ContainerID, err)
		return nil
	}
	if c.passesStraight() {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.settings.Timeout)
	defer cancel()
	if _, err := cni.NewClient(c.settings.AgentSocket).Call(ctx, cni.PathDel, c.request); err != nil {
		logf("DEL of pod %s (sandbox %s): %v; the agent drops the namespace when it finds it gone", c.request.Pod(), args.ContainerID, err)
	}
	return nil
}

// cmdStatus succeeds whenever the configuration is valid: see the package comment for why an
// unreachable agent is not a failed STATUS.
func cmdStatus(args *skel.CmdArgs) error {
	if _, _, err := cni.ParseConf(args.StdinData); err != nil {
		return types.NewError(errPluginNotAvailable, err.Error(), "")
	}
	return nil
}

// handOver asks the agent at path (ADD or CHECK) and fails when the agent says the pod cannot
// start, or cannot be reached while the pod might be meshed.
func (c call) handOver(path string) error {
	ctx, cancel := context.WithTimeout(context.Background(), c.settings.Timeout)
	defer cancel()
	_, err := cni.NewClient(c.settings.AgentSocket).Call(ctx, path, c.request)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, cni.ErrUnreachable):
		return c.withoutAgent(err)
	}
	return types.NewError(types.ErrTryAgainLater, fmt.Sprintf("%s: pod %s: %v", cni.PluginType, c.request.Pod(), err), "")
}

// withoutAgent decides alone, the agent unreachable (unreachable says why): the pod passes if it
// is not meshed, and fails otherwise, or when that cannot be told.
func (c call) withoutAgent(unreachable error) error {
	pod := c.request.Pod()
	failClosed := func(format string, args ...any) error {
		return types.NewError(types.ErrTryAgainLater, fmt.Sprintf("%s: pod %s: %v; ", cni.PluginType, pod, unreachable)+fmt.Sprintf(format, args...), "")
	}
	if c.settings.Kubeconfig == "" {
		return failClosed("the plugin has no kubeconfig to tell whether the pod is meshed, so it fails closed; the kubelet retries until the agent answers")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", c.settings.Kubeconfig)
	if err != nil {
		return failClosed("its kubeconfig does not load (%v), so whether the pod is meshed cannot be told: failing closed; the kubelet retries until the agent answers", err)
	}
	cfg.Timeout = c.settings.Timeout
	pods, err := corev1client.NewForConfig(cfg)
	if err != nil {
		return failClosed("%v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.settings.Timeout)
	defer cancel()
	p, err := pods.Pods(c.request.Namespace).Get(ctx, c.request.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		logf("pod %s: %v; the pod no longer exists: passing it through", pod, unreachable)
		return nil
	case err != nil:
		return failClosed("reading the pod to tell whether it is meshed failed too (%v): failing closed; the kubelet retries until the agent answers", err)
	case c.request.UID != "" && string(p.UID) != c.request.UID:
		logf("pod %s: %v; the pod of that name is another (uid %s, not %s): passing the sandbox through", pod, unreachable, p.UID, c.request.UID)
		return nil
	}
	in, why := c.settings.Ignored.Verdict(p)
	if in {
		return failClosed("the pod is in the mesh (%s), so it must not start uncaptured; the kubelet retries until the agent answers", why)
	}
	logf("pod %s: %v; the pod is not in the mesh (%s): passing it through", pod, unreachable, why)
	return nil
}

// prevResult is what the plugin prints on success: the previous plugin's result exactly as the
// runtime passed it (checked to be a result of the configuration's version), or, first in a
// chain, an empty result of that version.
func prevResult(conf cni.PluginConf) ([]byte, error) {
	if len(conf.PrevResult) == 0 {
		empty, err := (&types100.Result{CNIVersion: types100.ImplementedSpecVersion}).GetAsVersion(conf.CNIVersion)
		if err != nil {
			return nil, types.NewError(types.ErrIncompatibleCNIVersion, err.Error(), "")
		}
		return marshalResult(empty)
	}
	if _, err := version.NewResult(conf.CNIVersion, conf.PrevResult); err != nil {
		return nil, types.NewError(types.ErrDecodingFailure,
			fmt.Sprintf("%s: prevResult is not a CNI %s result (%v): the runtime passes the previous plugin's result", cni.PluginType, conf.CNIVersion, err), "")
	}
	return conf.PrevResult, nil
}

func marshalResult(r types.Result) ([]byte, error) {
	var b strings.Builder
	if err := r.PrintTo(&b); err != nil {
		return nil, err
	}
	return []byte(b.String()), nil
}

// logf writes a line to stderr, which the runtime logs.
func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, cni.PluginType+": "+format+"\n", args...)
}
