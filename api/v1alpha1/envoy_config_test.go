// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package v1alpha1_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/aether-mesh/aether-operator/internal/seccomp"
	"github.com/aether-mesh/aether-operator/internal/testenv"
	"github.com/aether-mesh/aether-operator/internal/xds"
)

// The node's Envoy (config/envoy, a kustomize component added by config/default) and what the
// cluster tier deploys without it (config/base).

const (
	envoyImageRepo   = "docker.io/envoyproxy/envoy"
	envoyProtoModule = "github.com/envoyproxy/go-control-plane/envoy"
	tokenMountPath   = "/var/run/secrets/kubernetes.io/serviceaccount"
)

// renderAgent renders config/<dir> as kubectl apply -k does (the test API server's kubectl) and
// returns the agent's DaemonSet.
func renderAgent(t *testing.T, dir string) *appsv1.DaemonSet {
	t.Helper()
	ds := renderDaemonSet(t, dir, "aether-agent")
	if ds == nil {
		t.Fatalf("config/%s renders no agent DaemonSet", dir)
	}
	return ds
}

// renderDaemonSet renders config/<dir> and returns its DaemonSet labelled app.kubernetes.io/name
// name, or nil.
func renderDaemonSet(t *testing.T, dir, name string) *appsv1.DaemonSet {
	t.Helper()
	out, stderr, err := env.Kubectl(testContext(t), "kustomize", filepath.Join(testenv.RepoRoot(), "config", dir))
	if err != nil {
		t.Fatalf("kubectl kustomize config/%s: %v\n%s", dir, err, stderr)
	}
	for doc := range bytes.SplitSeq([]byte(out), []byte("\n---\n")) {
		var ds appsv1.DaemonSet
		if err := yaml.Unmarshal(doc, &ds); err != nil {
			t.Fatal(err)
		}
		if ds.Kind == "DaemonSet" && ds.Labels["app.kubernetes.io/name"] == name {
			return &ds
		}
	}
	return nil
}

// protoLine is the major.minor (v1.40) of the Envoy protos the agent is built with, as go.mod
// requires them (a test binary records no module versions).
func protoLine(t *testing.T) string {
	t.Helper()
	gomod, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(gomod)) {
		if fields := strings.Fields(line); len(fields) >= 2 && fields[0] == envoyProtoModule {
			return semverLine(fields[1])
		}
	}
	t.Fatalf("go.mod does not require %s", envoyProtoModule)
	return ""
}

// semverLine is v<major>.<minor> of a version v<major>.<minor>.<patch>, or "" for anything else.
func semverLine(v string) string {
	parts := strings.Split(v, ".")
	if len(parts) != 3 || !strings.HasPrefix(v, "v") {
		return ""
	}
	return parts[0] + "." + parts[1]
}

func container(spec *corev1.PodSpec, name string) *corev1.Container {
	for i := range spec.Containers {
		if spec.Containers[i].Name == name {
			return &spec.Containers[i]
		}
	}
	return nil
}

func volume(spec *corev1.PodSpec, name string) *corev1.Volume {
	for i := range spec.Volumes {
		if spec.Volumes[i].Name == name {
			return &spec.Volumes[i]
		}
	}
	return nil
}

// mountAt is c's mount at dir, or nil.
func mountAt(c *corev1.Container, dir string) *corev1.VolumeMount {
	for i := range c.VolumeMounts {
		if c.VolumeMounts[i].MountPath == dir {
			return &c.VolumeMounts[i]
		}
	}
	return nil
}

// sharedDir checks that the agent writes dir and Envoy only reads it, from one host directory
// (two pods of a node share nothing else).
func sharedDir(agentSpec, envoySpec *corev1.PodSpec, dir, what string) []string {
	a, e := mountAt(container(agentSpec, "agent"), dir), mountAt(container(envoySpec, "envoy"), dir)
	if a == nil || e == nil {
		return []string{fmt.Sprintf("%s: %s is not mounted in both the agent and Envoy (agent %v, envoy %v)", what, dir, a != nil, e != nil)}
	}
	av, ev := volume(agentSpec, a.Name), volume(envoySpec, e.Name)
	switch {
	case av == nil || ev == nil || av.HostPath == nil || ev.HostPath == nil:
		return []string{fmt.Sprintf("%s: %s is not a host directory in both pods (the only volume two pods of a node share)", what, dir)}
	case av.HostPath.Path != ev.HostPath.Path:
		return []string{fmt.Sprintf("%s: the pods mount different host directories at %s (%s, %s)", what, dir, av.HostPath.Path, ev.HostPath.Path)}
	case a.ReadOnly || !e.ReadOnly:
		return []string{fmt.Sprintf("%s: %s must be writable by the agent and read-only for Envoy (agent readOnly=%v, envoy readOnly=%v)", what, dir, a.ReadOnly, e.ReadOnly)}
	}
	return nil
}

// envoyProblems lists how the node's Envoy (its own DaemonSet, envoyDS) and the agent's DaemonSet
// fall short of the proxy the agent configures: the image on the protos' line, the bootstrap the
// agent writes and Envoy reads and the xDS socket, both in a host directory they share, the pods'
// network namespaces, least privilege, no API credentials, the handover's rollout (a new Envoy
// beside the old, never none) and no CNI directory of the agent's.
func envoyProblems(agentDS, envoyDS *appsv1.DaemonSet, line string) []string {
	if envoyDS == nil {
		return []string{"no DaemonSet app.kubernetes.io/name=aether-envoy: the node has no Envoy"}
	}
	agentSpec, spec := &agentDS.Spec.Template.Spec, &envoyDS.Spec.Template.Spec
	agent, envoy := container(agentSpec, "agent"), container(spec, "envoy")
	if agent == nil || envoy == nil {
		return []string{fmt.Sprintf("no container agent (%v) or envoy (%v) in their DaemonSets", agent != nil, envoy != nil)}
	}
	var problems []string
	report := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

	repo, tag, _ := strings.Cut(envoy.Image, ":")
	if repo != envoyImageRepo || semverLine(tag) != line {
		report("image %s: want %s:<%s.x>, the official image on the line of the protos the agent is built with", envoy.Image, envoyImageRepo, line)
	}

	bootstrap := flag(agent, "envoy-bootstrap")
	command := strings.Join(append(slices.Clone(envoy.Command), envoy.Args...), " ")
	switch {
	case bootstrap == "":
		report("the agent has no --envoy-bootstrap: nobody writes Envoy's bootstrap")
	case !strings.Contains(command, "-c "+bootstrap+" "):
		report("Envoy does not start from the bootstrap the agent writes (%s): %s", bootstrap, command)
	default:
		problems = append(problems, sharedDir(agentSpec, spec, path.Dir(bootstrap), "the bootstrap")...)
	}
	if socket, ok := strings.CutPrefix(flag(agent, "xds-address"), "unix://"); !ok {
		report("the agent's --xds-address %q is not a unix socket Envoy's pod can reach", flag(agent, "xds-address"))
	} else {
		problems = append(problems, sharedDir(agentSpec, spec, path.Dir(socket), "the xDS socket")...)
	}

	netns := mountAt(envoy, "/var/run/netns")
	switch {
	case netns == nil:
		report("Envoy does not mount /var/run/netns, where the pods' network namespaces are")
	case volume(spec, netns.Name) == nil || volume(spec, netns.Name).HostPath == nil || volume(spec, netns.Name).HostPath.Path != "/var/run/netns":
		report("Envoy's /var/run/netns is not the host's")
	case !netns.ReadOnly || netns.MountPropagation == nil || *netns.MountPropagation != corev1.MountPropagationHostToContainer:
		report("Envoy's /var/run/netns must be read-only with HostToContainer propagation (a pod's namespace is mounted after Envoy starts): readOnly=%v propagation=%v", netns.ReadOnly, netns.MountPropagation)
	}
	for _, v := range spec.Volumes {
		if v.HostPath != nil && (v.HostPath.Path == hostDirs["cni-run"].host || strings.HasPrefix(v.HostPath.Path, hostDirs["cni-run"].host+"/")) {
			report("Envoy mounts %s: the agent's CNI directory holds its credentials and the hand-over socket", v.HostPath.Path)
		}
	}

	sc := envoy.SecurityContext
	switch {
	case sc == nil || sc.Capabilities == nil:
		report("Envoy has no securityContext capabilities")
	case !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || !slices.Equal(sc.Capabilities.Add, []corev1.Capability{"SYS_ADMIN", "NET_ADMIN", "DAC_OVERRIDE"}):
		report("Envoy's capabilities are drop %v add %v: want drop [ALL] add [SYS_ADMIN NET_ADMIN DAC_OVERRIDE] (setns into the pods' network namespaces; SO_MARK on the sockets it opens there; connecting to apps' Unix sockets)",
			sc.Capabilities.Drop, sc.Capabilities.Add)
	case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
		report("Envoy's root filesystem is writable")
	case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.Privileged != nil && *sc.Privileged:
		report("Envoy may escalate its privileges (allowPrivilegeEscalation %v, privileged %v)", sc.AllowPrivilegeEscalation, sc.Privileged)
	case sc.RunAsGroup == nil || agentGroup(agentSpec) == nil || *sc.RunAsGroup != *agentGroup(agentSpec):
		report("Envoy does not run as the agent's group, which owns the xDS socket")
	}

	problems = append(problems, seccompProblems(spec, envoy)...)

	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		report("API credentials reach Envoy's pod (automountServiceAccountToken is not false)")
	}
	// envoy-helper alone holds the pod's token: it asks the API server to review each stats
	// scraper's (its ServiceAccount may create token and access reviews, nothing else). Envoy,
	// and anything else beside it, holds none.
	for _, c := range spec.Containers {
		if c.Name != "envoy-helper" && mountAt(&c, tokenMountPath) != nil {
			report("API credentials are mounted into Envoy's pod (container %s)", c.Name)
		}
	}
	if !credentialed(agentSpec, agent) {
		report("the agent has no API credentials at %s", tokenMountPath)
	}

	// Two Envoys of a node, side by side during a rollout: each its own loopback admin endpoint.
	if spec.HostNetwork {
		report("Envoy's pod is on the host network: during a rollout the new Envoy's admin endpoint %s would find the old one's port taken", xds.DefaultAdminAddress)
	}
	if r := envoyDS.Spec.UpdateStrategy.RollingUpdate; envoyDS.Spec.UpdateStrategy.Type != appsv1.RollingUpdateDaemonSetStrategyType || r == nil ||
		r.MaxSurge == nil || r.MaxSurge.String() != "1" || r.MaxUnavailable == nil || r.MaxUnavailable.String() != "0" {
		report("Envoy's updateStrategy is not RollingUpdate with maxSurge 1 and maxUnavailable 0: a node would be without a proxy during an upgrade")
	}
	if p := envoy.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/ready" {
		report("Envoy has no readiness probe on /ready: a rollout would stop the old Envoy before the new one has its configuration")
	}
	_, adminPort, _ := net.SplitHostPort(xds.DefaultAdminAddress)
	if p := envoy.ReadinessProbe; p != nil && p.HTTPGet != nil && p.HTTPGet.Port.String() == adminPort && p.HTTPGet.Host != "127.0.0.1" {
		report("Envoy's readiness probe reaches the admin endpoint %s from outside its loopback", xds.DefaultAdminAddress)
	}
	return problems
}

// seccompProblems lists how Envoy's pod falls short of running Envoy under its own seccomp
// profile (internal/seccomp): the runtime's default allows a container holding SYS_ADMIN mount,
// unshare and bpf. The profile is Localhost, seccomp.EnvoyLocalhostProfile under the kubelet's
// <root dir>/seccomp; an init container writes it there with the agent's install-seccomp, from a
// host directory that is that profile's own (<root dir>/seccomp/aether), which Envoy does not mount.
func seccompProblems(spec *corev1.PodSpec, envoy *corev1.Container) []string {
	var problems []string
	report := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if sc := envoy.SecurityContext; sc == nil || sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeLocalhost ||
		sc.SeccompProfile.LocalhostProfile == nil || *sc.SeccompProfile.LocalhostProfile != seccomp.EnvoyLocalhostProfile {
		var got any
		if sc != nil {
			got = sc.SeccompProfile
		}
		report("Envoy's seccomp profile is %+v: want Localhost %s (the runtime's default lets a container holding SYS_ADMIN mount, unshare and load BPF)", got, seccomp.EnvoyLocalhostProfile)
	}
	if sc := spec.SecurityContext; sc == nil || sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		report("Envoy's pod is not under the runtime's default seccomp profile (its sandbox and install-seccomp)")
	}
	var installer *corev1.Container
	for i, c := range spec.InitContainers {
		if slices.Equal(c.Command[:min(2, len(c.Command))], []string{"/agent", "install-seccomp"}) {
			installer = &spec.InitContainers[i]
		}
	}
	if installer == nil {
		return append(problems, "no init container runs /agent install-seccomp: nothing writes Envoy's seccomp profile before the kubelet creates its container")
	}
	dir := ""
	for _, arg := range installer.Command[2:] {
		if v, ok := strings.CutPrefix(arg, "--dir="); ok {
			dir = v
		}
	}
	m := mountAt(installer, dir)
	if m == nil {
		return append(problems, fmt.Sprintf("install-seccomp writes into --dir=%q, which it does not mount", dir))
	}
	v := volume(spec, m.Name)
	switch want := "/seccomp/" + path.Dir(seccomp.EnvoyLocalhostProfile); {
	case v == nil || v.HostPath == nil:
		report("install-seccomp's %s is not a host directory: the kubelet reads Localhost profiles from its own", dir)
	case !strings.HasSuffix(v.HostPath.Path, want) || !path.IsAbs(v.HostPath.Path):
		report("install-seccomp writes into the host's %s, not <kubelet root dir>%s, where the kubelet looks up %s", v.HostPath.Path, want, seccomp.EnvoyLocalhostProfile)
	case m.ReadOnly:
		report("install-seccomp's %s is read-only", dir)
	}
	for _, c := range spec.Containers {
		for _, cm := range c.VolumeMounts {
			if cm.Name == m.Name {
				report("container %s mounts the seccomp profile directory: only install-seccomp writes it", c.Name)
			}
		}
	}
	return problems
}

// credentialed says whether c has the pod's API credentials: automounted (the pod does not turn
// that off) or mounted by hand.
func credentialed(spec *corev1.PodSpec, c *corev1.Container) bool {
	return spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken || mountAt(c, tokenMountPath) != nil
}

// TestEnvoyComponent renders config/default (with the node's Envoy, a DaemonSet of its own) and
// config/base (the cluster tier's, without it): the first has an Envoy that meets envoyProblems'
// checks, the second none, and every DaemonSet passes the real API server's validation (a
// server-side dry run). Negative controls: each broken copy is caught, and the dry run does
// validate (the API server refuses Bidirectional propagation in a container that is not
// privileged).
func TestEnvoyComponent(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t, ctx)
	line := protoLine(t)
	agent, envoy := renderAgent(t, "default"), renderDaemonSet(t, "default", "aether-envoy")
	without := renderAgent(t, "base")

	if problems := envoyProblems(agent, envoy, line); len(problems) > 0 {
		t.Errorf("config/default's node Envoy:\n%s", strings.Join(problems, "\n"))
	}
	if renderDaemonSet(t, "base", "aether-envoy") != nil {
		t.Error("config/base, which the cluster tier deploys, has the Envoy DaemonSet")
	}
	if mountAt(container(&without.Spec.Template.Spec, "agent"), path.Dir(xds.DefaultXDSSocket)) == nil {
		t.Errorf("config/base's agent has no writable %s for its xDS socket (its root filesystem is read-only)", path.Dir(xds.DefaultXDSSocket))
	}

	for what, ds := range map[string]*appsv1.DaemonSet{"config/default's agent": agent, "config/default's Envoy": envoy, "config/base's agent": without} {
		if ds == nil {
			continue // reported above
		}
		if err := dryRun(ctx, ds, ns); err != nil {
			t.Errorf("the API server refuses %s DaemonSet: %v", what, err)
		}
	}
	if envoy == nil {
		return
	}

	// Negative controls.
	for what, tc := range map[string]struct {
		breakIt func(agent, envoy *appsv1.DaemonSet)
		want    string
	}{
		"another line":   {func(_, e *appsv1.DaemonSet) { envoyContainer(e).Image = envoyImageRepo + ":v1.39.2" }, "on the line of the protos"},
		"a floating tag": {func(_, e *appsv1.DaemonSet) { envoyContainer(e).Image = envoyImageRepo + ":latest" }, "on the line of the protos"},
		"NET_RAW too": {func(_, e *appsv1.DaemonSet) {
			c := envoyContainer(e)
			c.SecurityContext.Capabilities.Add = append(c.SecurityContext.Capabilities.Add, "NET_RAW")
		}, "want drop [ALL] add [SYS_ADMIN NET_ADMIN DAC_OVERRIDE]"},
		"no DAC_OVERRIDE (an app's 0660 socket refuses the proxy)": {func(_, e *appsv1.DaemonSet) {
			envoyContainer(e).SecurityContext.Capabilities.Add = []corev1.Capability{"SYS_ADMIN", "NET_ADMIN"}
		}, "want drop [ALL] add [SYS_ADMIN NET_ADMIN DAC_OVERRIDE]"},
		"no NET_ADMIN (no SO_MARK: the proxy's own upstream would be captured again)": {func(_, e *appsv1.DaemonSet) {
			envoyContainer(e).SecurityContext.Capabilities.Add = []corev1.Capability{"SYS_ADMIN"}
		}, "want drop [ALL] add [SYS_ADMIN NET_ADMIN DAC_OVERRIDE]"},
		"no propagation": {func(_, e *appsv1.DaemonSet) { mountAt(envoyContainer(e), "/var/run/netns").MountPropagation = nil }, "HostToContainer"},
		"a writable bootstrap": {func(a, e *appsv1.DaemonSet) {
			mountAt(envoyContainer(e), path.Dir(flag(container(&a.Spec.Template.Spec, "agent"), "envoy-bootstrap"))).ReadOnly = false
		}, "read-only for Envoy"},
		"no bootstrap flag": {func(a, _ *appsv1.DaemonSet) {
			c := container(&a.Spec.Template.Spec, "agent")
			c.Args = slices.DeleteFunc(c.Args, func(arg string) bool { return strings.HasPrefix(arg, "--envoy-bootstrap=") })
		}, "no --envoy-bootstrap"},
		"the socket elsewhere": {func(a, _ *appsv1.DaemonSet) {
			container(&a.Spec.Template.Spec, "agent").Args = append(container(&a.Spec.Template.Spec, "agent").Args, "--xds-address=unix:///run/elsewhere/xds.sock")
		}, "the xDS socket: /run/elsewhere is not mounted in both"},
		"another host directory": {func(_, e *appsv1.DaemonSet) {
			volume(&e.Spec.Template.Spec, "proxy-run").HostPath.Path = "/var/run/other"
		}, "different host directories"},
		"credentials in Envoy": {func(_, e *appsv1.DaemonSet) { e.Spec.Template.Spec.AutomountServiceAccountToken = nil }, "API credentials reach Envoy's pod"},
		"the CNI directory in Envoy": {func(_, e *appsv1.DaemonSet) {
			e.Spec.Template.Spec.Volumes = append(e.Spec.Template.Spec.Volumes, corev1.Volume{Name: "cni-run",
				VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: hostDirs["cni-run"].host}}})
		}, "Envoy mounts " + hostDirs["cni-run"].host},
		"the host network": {func(_, e *appsv1.DaemonSet) { e.Spec.Template.Spec.HostNetwork = true }, "on the host network"},
		"one at a time, none meanwhile": {func(_, e *appsv1.DaemonSet) {
			e.Spec.UpdateStrategy.RollingUpdate.MaxSurge = nil
		}, "maxSurge 1 and maxUnavailable 0"},
		"no readiness": {func(_, e *appsv1.DaemonSet) { envoyContainer(e).ReadinessProbe = nil }, "no readiness probe on /ready"},
		"the runtime's seccomp profile for Envoy": {func(_, e *appsv1.DaemonSet) {
			envoyContainer(e).SecurityContext.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
		}, "want Localhost " + seccomp.EnvoyLocalhostProfile},
		"another Localhost profile": {func(_, e *appsv1.DaemonSet) {
			envoyContainer(e).SecurityContext.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: new("aether/other.json")}
		}, "want Localhost " + seccomp.EnvoyLocalhostProfile},
		"nobody writes the profile": {func(_, e *appsv1.DaemonSet) { e.Spec.Template.Spec.InitContainers = nil }, "no init container runs /agent install-seccomp"},
		"the whole seccomp directory": {func(_, e *appsv1.DaemonSet) {
			if v := volume(&e.Spec.Template.Spec, "seccomp"); v != nil && v.HostPath != nil {
				v.HostPath.Path = "/var/lib/kubelet/seccomp"
			}
		}, "not <kubelet root dir>/seccomp/aether"},
		"Envoy mounts the profile directory": {func(_, e *appsv1.DaemonSet) {
			c := envoyContainer(e)
			c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "seccomp", MountPath: "/seccomp"})
		}, "container envoy mounts the seccomp profile directory"},
	} {
		brokenAgent, brokenEnvoy := agent.DeepCopy(), envoy.DeepCopy()
		tc.breakIt(brokenAgent, brokenEnvoy)
		problems := strings.Join(envoyProblems(brokenAgent, brokenEnvoy, line), "\n")
		if !strings.Contains(problems, tc.want) {
			t.Errorf("negative control %q: want a problem saying %q, got %q", what, tc.want, problems)
		}
	}
	if problems := strings.Join(envoyProblems(agent, nil, line), "\n"); !strings.Contains(problems, "the node has no Envoy") {
		t.Errorf("negative control: no Envoy DaemonSet: got %q", problems)
	}
	bidirectional := envoy.DeepCopy()
	mountAt(envoyContainer(bidirectional), "/var/run/netns").MountPropagation = new(corev1.MountPropagationBidirectional)
	if err := dryRun(ctx, bidirectional, ns); err == nil || !strings.Contains(err.Error(), "Bidirectional mount propagation is available only to privileged containers") {
		t.Errorf("negative control: Envoy's /var/run/netns with Bidirectional propagation: want the API server's refusal, got %v", err)
	}
}

// envoyContainer is the container envoy of the node's Envoy DaemonSet.
func envoyContainer(ds *appsv1.DaemonSet) *corev1.Container {
	return container(&ds.Spec.Template.Spec, "envoy")
}

// dryRun creates ds in namespace ns with a server-side dry run: the API server validates it (and
// runs its admission) without storing it.
func dryRun(ctx context.Context, ds *appsv1.DaemonSet, ns string) error {
	ds = ds.DeepCopy()
	ds.Namespace = ns
	return env.Client.Create(ctx, ds, client.DryRunAll)
}

// agentGroup is the group the agent container runs as (its own securityContext's; the pod sets
// none: the runtime refuses a pod-level group without a user).
func agentGroup(spec *corev1.PodSpec) *int64 {
	for _, c := range spec.Containers {
		if c.Name == "agent" && c.SecurityContext != nil {
			return c.SecurityContext.RunAsGroup
		}
	}
	return nil
}
