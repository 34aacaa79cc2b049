// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aether-mesh/aether-operator/internal/agent"
	"github.com/aether-mesh/aether-operator/internal/capture"
	"github.com/aether-mesh/aether-operator/internal/cni"
	"github.com/aether-mesh/aether-operator/internal/registration"
)

// cniFlags are the flags that say how the CNI plugin is installed and reaches the agent: the
// agent's, and its install-cni and uninstall-cni subcommands' (the DaemonSet's init container), so
// the entry the init container writes and the one the agent keeps are the same.
type cniFlags struct {
	socket     string
	kubeconfig string
	// serviceAccount is the plugin's own ServiceAccount, in the agent's namespace.
	serviceAccount string
	timeout        time.Duration
	confDir        string
	binDir         string
	binary         string
	ignored        string
}

// bind adds the flags to flags. confDirDefault and binDirDefault differ: the subcommands exist to
// install, so they default to the DaemonSet's mounts; the agent keeps the plugin installed only
// when told where.
func (f *cniFlags) bind(flags *flag.FlagSet, confDirDefault, binDirDefault string) {
	flags.StringVar(&f.socket, "cni-socket", cni.DefaultSocket, "The unix socket where the agent answers the CNI plugin, at the same path on the host and in the agent's container (the plugin runs on the host); the registry of the pods' network namespaces is kept beside it (netns.json), and, with --upstreams=declared, the record of what the node fetched on demand (demands.json). Empty: no hand-over (the agent then learns no pod's network namespace but from --netns-path-template), and the on-demand record is kept in memory only.")
	flags.StringVar(&f.kubeconfig, "cni-kubeconfig", cni.DefaultKubeconfig, "Where the plugin's kubeconfig is kept (a token of --cni-service-account, 0600), at the same path on the host and in the container: the plugin reads a pod with it only when the agent is unreachable, to fail ADD for a meshed pod and pass any other. Empty: none (the plugin then fails ADD for every pod outside the ignored namespaces while the agent is unreachable).")
	flags.StringVar(&f.serviceAccount, "cni-service-account", "aether-operator-cni", "The plugin's own ServiceAccount, in the agent's namespace (POD_NAMESPACE), which may only get pods: the agent asks for its token (TokenRequest, one hour, renewed after 48 minutes) and writes it into --cni-kubeconfig.")
	flags.DurationVar(&f.timeout, "cni-timeout", cni.DefaultTimeout, "How long the plugin waits for the agent's answer (and, with the agent unreachable, for the API server's) before failing an ADD; the kubelet retries.")
	flags.StringVar(&f.confDir, "cni-conf-dir", confDirDefault, "The node's CNI configuration directory as mounted in the container (the host's /etc/cni/net.d): the plugin is chained last into its first configuration file, which must be a conflist. For the agent: keep the plugin installed there while it runs, and remove it when its DaemonSet is deleted; empty: neither.")
	flags.StringVar(&f.binDir, "cni-bin-dir", binDirDefault, "The node's CNI binary directory as mounted in the container (the host's /opt/cni/bin), where the plugin binary goes, named "+cni.PluginType+".")
	flags.StringVar(&f.binary, "cni-plugin-binary", "/"+cni.PluginType, "The plugin binary to install (in the agent's image).")
	flags.StringVar(&f.ignored, "ignored-namespaces", strings.Join(registration.DefaultIgnoredNamespaces, ","), "Comma-separated namespaces the mesh never takes, whatever their pods' labels; the namespace this process runs in (POD_NAMESPACE, from the downward API) is added.")
}

// ignoredNamespaces is --ignored-namespaces with the process's own namespace.
func (f *cniFlags) ignoredNamespaces() (registration.IgnoredNamespaces, error) {
	ignored, err := registration.ParseIgnoredNamespaces(f.ignored)
	if err != nil {
		return nil, err
	}
	return ignored.With(os.Getenv("POD_NAMESPACE")), nil
}

// installer is the Installer the flags describe.
func (f *cniFlags) installer(ignored registration.IgnoredNamespaces) cni.Installer {
	names := strings.Split(ignored.String(), ",")
	if ignored.String() == "" {
		names = []string{} // none: an empty list, not the plugin's defaults
	}
	return cni.Installer{BinDir: f.binDir, ConfDir: f.confDir, Binary: f.binary, Entry: cni.Entry{
		Type: cni.PluginType, AgentSocket: f.socket, Kubeconfig: f.kubeconfig, Timeout: f.timeout.String(), IgnoredNamespaces: names,
	}}
}

// check names the first flag that cannot work.
func (f *cniFlags) check() error {
	for name, path := range map[string]string{"--cni-socket": f.socket, "--cni-kubeconfig": f.kubeconfig} {
		if path != "" && !filepath.IsAbs(path) {
			return fmt.Errorf("%s %q is not an absolute path: the plugin, which runs on the host, reads it at that path", name, path)
		}
	}
	if f.kubeconfig != "" && f.serviceAccount == "" {
		return fmt.Errorf("--cni-kubeconfig %q needs --cni-service-account, the plugin's ServiceAccount whose token it carries (or set --cni-kubeconfig= to write none)", f.kubeconfig)
	}
	if f.timeout <= 0 {
		return fmt.Errorf("--cni-timeout %s is not positive; e.g. %s", f.timeout, cni.DefaultTimeout)
	}
	return nil
}

// runCNISubcommand runs `agent install-cni`, `agent uninstall-cni` or `agent uninstall` with
// args, and returns the process's exit code.
func runCNISubcommand(name string, args []string, stderr io.Writer) int {
	flags := flag.NewFlagSet("agent "+name, flag.ContinueOnError)
	flags.SetOutput(stderr)
	var f cniFlags
	f.bind(flags, "/host/etc/cni/net.d", "/host/opt/cni/bin")
	wait := flags.Duration("wait", 0, "install-cni: how long to wait for the node's primary CNI to write its configuration; 0 waits until the process is stopped.")
	if err := flags.Parse(args); err != nil {
		return 2
	}
	ignored, err := f.ignoredNamespaces()
	if err == nil {
		err = f.check()
	}
	if err != nil {
		fmt.Fprintf(stderr, "agent %s: %v\n", name, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if *wait > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *wait)
		defer cancel()
	}
	in := f.installer(ignored)
	switch name {
	case "uninstall":
		err = uninstall(in, f, stderr)
	case "uninstall-cni":
		err = uninstallCNI(in, f.kubeconfig, stderr)
	default:
		err = installCNI(ctx, in, f.kubeconfig, f.serviceAccount, stderr)
	}
	if err != nil {
		fmt.Fprintf(stderr, "agent %s: %v\n", name, err)
		return 1
	}
	return 0
}

// uninstall is `agent uninstall`, the agent's own uninstall by hand, for a node whose agent
// stopped without telling it was uninstalled (an unreachable API server, a force-deleted pod):
// the CNI plugin first, so that no pod is handed over any more, then every pod's capture table
// (the pods of the registry beside --cni-socket), so that their traffic goes directly to its
// destinations again. Run it only once the agent is gone from the node: a running agent
// programs the tables again.
func uninstall(in cni.Installer, f cniFlags, out io.Writer) error {
	if err := uninstallCNI(in, f.kubeconfig, out); err != nil {
		return err
	}
	if f.socket == "" {
		return errors.New("--cni-socket is empty: the registry of the pods' network namespaces is kept beside it, and no pod's capture table can be found without it")
	}
	file := filepath.Join(filepath.Dir(f.socket), "netns.json")
	registry, dropped, err := agent.OpenNetNS(file)
	if err != nil {
		return err
	}
	if len(dropped) > 0 {
		fmt.Fprintf(out, "pods whose network namespace is already gone: %s\n", strings.Join(dropped, ", "))
	}
	log := funcr.New(func(prefix, args string) { fmt.Fprintln(out, prefix, args) }, funcr.Options{})
	count, err := agent.RemoveCapture(registry, log)
	fmt.Fprintf(out, "capture tables (table %s %s) of the pods in %s: %s\n", capture.TableFamily, capture.TableName, file, count)
	if err != nil {
		return fmt.Errorf("some pods stay captured (run again, or recreate them): %w", err)
	}
	if err := os.Remove(file); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing the network namespace registry: %w", err)
	}
	return nil
}

// installCNI is install-cni: the plugin's kubeconfig first (the plugin may be called the moment
// the conflist names it, and must then be able to read a pod), then the binary and the conflist
// entry, once the node's primary CNI has written its conflist.
func installCNI(ctx context.Context, in cni.Installer, kubeconfig, serviceAccount string, out io.Writer) error {
	if kubeconfig != "" {
		cfg, err := ctrl.GetConfig()
		if err != nil {
			return fmt.Errorf("the plugin's kubeconfig needs the agent's credentials to ask for the plugin's token: %w (or set --cni-kubeconfig= to write none)", err)
		}
		token, err := pluginToken(cfg, serviceAccount)
		if err != nil {
			return err
		}
		if _, err := agent.WritePluginKubeconfig(ctx, kubeconfig, cfg, token); err != nil {
			return err
		}
		fmt.Fprintf(out, "wrote the plugin's kubeconfig %s (a token of ServiceAccount %s/%s)\n", kubeconfig, token.Namespace, token.Name)
	}
	if _, err := in.WaitForConflist(ctx, 30*time.Second, func(err error) {
		fmt.Fprintf(out, "waiting for the node's primary CNI to write its configuration: %v\n", err)
	}); err != nil {
		return err
	}
	conflist, changed, err := in.Install()
	if err != nil {
		return err
	}
	if changed {
		fmt.Fprintf(out, "installed %s: %s, chained last in %s\n", cni.PluginType, filepath.Join(in.BinDir, cni.PluginType), conflist)
	} else {
		fmt.Fprintf(out, "%s was already installed: %s, chained last in %s\n", cni.PluginType, filepath.Join(in.BinDir, cni.PluginType), conflist)
	}
	return nil
}

// uninstallCNI takes the plugin off the node: its conflist entry, its binary, its kubeconfig.
func uninstallCNI(in cni.Installer, kubeconfig string, out io.Writer) error {
	conflist, changed, err := in.Uninstall()
	if err != nil {
		return err
	}
	if kubeconfig != "" {
		if err := os.Remove(kubeconfig); err == nil {
			changed = true
		} else if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("removing the plugin's kubeconfig: %w", err)
		}
	}
	if changed {
		fmt.Fprintf(out, "removed %s from %s and %s\n", cni.PluginType, cmp.Or(conflist, in.ConfDir), in.BinDir)
	} else {
		fmt.Fprintf(out, "%s was not installed in %s or %s\n", cni.PluginType, in.ConfDir, in.BinDir)
	}
	return nil
}

// pluginToken is the source of the plugin's token: serviceAccount's, in the agent's namespace
// (POD_NAMESPACE, from the downward API), asked for with cfg's credentials.
func pluginToken(cfg *rest.Config, serviceAccount string) (*agent.ServiceAccountToken, error) {
	ns := os.Getenv("POD_NAMESPACE")
	if ns == "" {
		return nil, fmt.Errorf("the plugin's ServiceAccount %q is in the agent's namespace, and POD_NAMESPACE is not set: set it from the downward API (metadata.namespace)", serviceAccount)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &agent.ServiceAccountToken{Client: cs.CoreV1(), Namespace: ns, Name: serviceAccount, Lifetime: agent.PluginTokenLifetime}, nil
}

// learnSelf reads the agent's own pod as it starts: its controller (to find its DaemonSet when it
// stops, even once the pod is gone) and its ServiceAccount (whose spare token, bound to no pod,
// reads then if the pod's token is refused). On failure it says so and returns what it knows.
func learnSelf(c client.Reader, log logr.Logger) (agent.Self, string) {
	self := agent.Self{Pod: client.ObjectKey{Namespace: os.Getenv("POD_NAMESPACE"), Name: os.Getenv("POD_NAME")}}
	if self.Pod.Namespace == "" || self.Pod.Name == "" {
		return self, ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pod := &corev1.Pod{}
	if err := c.Get(ctx, self.Pod, pod); err != nil {
		log.Error(err, "Could not read the agent's own pod: when it stops, it finds its DaemonSet through the pod, and has no spare token", "pod", self.Pod)
		return self, ""
	}
	self.Owner = metav1.GetControllerOf(pod)
	return self, pod.Spec.ServiceAccountName
}

// uninstallIfRemoved runs when the agent stops: if its DaemonSet is going away (agent.Uninstalling),
// it takes the mesh off the node: the plugin first, then every pod's capture table (registry's
// pods), then the registry itself; otherwise it leaves all three, so that a restarted or upgraded
// agent finds them and no meshed pod goes uncaptured meanwhile. spare, when it holds a live
// token, reads again if the API server refuses the pod's token.
func uninstallIfRemoved(cfg *rest.Config, scheme *runtime.Scheme, self agent.Self, spare *agent.ServiceAccountToken, f cniFlags, ignored registration.IgnoredNamespaces, registry *agent.NetNS, netnsFile string, log logr.Logger) {
	if self.Pod.Namespace == "" || self.Pod.Name == "" {
		log.Info("Leaving the CNI plugin installed and the pods captured: POD_NAMESPACE and POD_NAME (downward API) do not name the agent's pod, so an uninstall cannot be told from a restart")
		return
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		log.Error(err, "Leaving the CNI plugin installed and the pods captured: no client to read the agent's DaemonSet")
		return
	}
	var spareReader client.Reader
	if spare != nil {
		if token, ok := spare.Current(); ok {
			if spareReader, err = client.New(agent.WithToken(cfg, token), client.Options{Scheme: scheme}); err != nil {
				log.Error(err, "No spare reader: a refused pod token will keep the CNI plugin")
			}
		}
	}
	// Reads, and the wait for a replaced DaemonSet (agent.Uninstalling: 10 s), within the pod's
	// grace period (30 s).
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	removePlugin := func() error { return uninstallCNI(f.installer(ignored), f.kubeconfig, io.Discard) }
	removed, err := agent.UninstallIfRemoved(ctx, self, c, spareReader, registry, removePlugin, log)
	if err != nil {
		log.Error(err, "The mesh is not wholly off the node; run `agent uninstall` on the node (see config/agent), or recreate the pods left captured")
		return // the registry stays, naming the pods left captured
	}
	if removed && netnsFile != "" {
		_ = os.Remove(netnsFile)
		_ = os.Remove(filepath.Join(filepath.Dir(netnsFile), agent.DemandsFile)) // nothing is fetched for a node off the mesh
	}
}

// netnsDrainTail is CNIOptions.DrainTail of --netns-drain-tail d: d, or for 0 (none) a negative
// one, zero being the option's default.
func netnsDrainTail(d time.Duration) (time.Duration, error) {
	switch {
	case d < 0:
		return 0, fmt.Errorf("--netns-drain-tail %s is negative; 0 for none, e.g. %s", d, agent.DefaultNetNSDrainTail)
	case d == 0:
		return -1, nil
	}
	return d, nil
}
