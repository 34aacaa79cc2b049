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
	out, stderr, err := env.Kubectl(testContext(t), "kustomize", filepath.Join(testenv.RepoRoot(), "config", dir))
	if err != nil {
		t.Fatalf("kubectl kustomize config/%s: %v\n%s", dir, err, stderr)
	}
	for doc := range bytes.SplitSeq([]byte(out), []byte("\n---\n")) {
		var ds appsv1.DaemonSet
		if err := yaml.Unmarshal(doc, &ds); err != nil {
			t.Fatal(err)
		}
		if ds.Kind == "DaemonSet" && ds.Labels["app.kubernetes.io/name"] == "aether-agent" {
			return &ds
		}
	}
	t.Fatalf("config/%s renders no agent DaemonSet", dir)
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

// sharedDir checks that the agent writes dir and Envoy only reads it, from one emptyDir.
func sharedDir(spec *corev1.PodSpec, agent, envoy *corev1.Container, dir, what string) []string {
	a, e := mountAt(agent, dir), mountAt(envoy, dir)
	switch {
	case a == nil || e == nil:
		return []string{fmt.Sprintf("%s: %s is not mounted in both containers (agent %v, envoy %v)", what, dir, a != nil, e != nil)}
	case a.Name != e.Name:
		return []string{fmt.Sprintf("%s: the containers mount different volumes at %s (%s, %s)", what, dir, a.Name, e.Name)}
	case a.ReadOnly || !e.ReadOnly:
		return []string{fmt.Sprintf("%s: %s must be writable by the agent and read-only for Envoy (agent readOnly=%v, envoy readOnly=%v)", what, dir, a.ReadOnly, e.ReadOnly)}
	case volume(spec, a.Name) == nil || volume(spec, a.Name).EmptyDir == nil:
		return []string{fmt.Sprintf("%s: volume %s is not an emptyDir of the pod", what, a.Name)}
	}
	return nil
}

// envoyProblems lists how ds falls short of the node's Envoy the agent configures: the image on
// the protos' line, the bootstrap the agent writes and Envoy reads, the xDS socket, the pods'
// network namespaces, least privilege and the admin endpoint on loopback.
func envoyProblems(ds *appsv1.DaemonSet, line string) []string {
	spec := &ds.Spec.Template.Spec
	agent, envoy := container(spec, "agent"), container(spec, "envoy")
	if agent == nil || envoy == nil {
		return []string{fmt.Sprintf("the agent's pod has no container envoy beside the agent (containers agent %v, envoy %v)", agent != nil, envoy != nil)}
	}
	var problems []string
	report := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

	repo, tag, _ := strings.Cut(envoy.Image, ":")
	if repo != envoyImageRepo || semverLine(tag) != line {
		report("image %s: want %s:<%s.x>, the official image on the line of the protos the agent is built with", envoy.Image, envoyImageRepo, line)
	}

	var bootstrap string
	for _, arg := range agent.Args {
		if v, ok := strings.CutPrefix(arg, "--envoy-bootstrap="); ok {
			bootstrap = v
		}
	}
	command := strings.Join(append(slices.Clone(envoy.Command), envoy.Args...), " ")
	switch {
	case bootstrap == "":
		report("the agent has no --envoy-bootstrap: nobody writes Envoy's bootstrap")
	case !strings.Contains(command, "-c "+bootstrap+" "):
		report("Envoy does not start from the bootstrap the agent writes (%s): %s", bootstrap, command)
	default:
		problems = append(problems, sharedDir(spec, agent, envoy, path.Dir(bootstrap), "the bootstrap")...)
	}
	problems = append(problems, sharedDir(spec, agent, envoy, path.Dir(xds.DefaultXDSSocket), "the xDS socket")...)

	netns := mountAt(envoy, "/var/run/netns")
	switch {
	case netns == nil:
		report("Envoy does not mount /var/run/netns, where the pods' network namespaces are")
	case volume(spec, netns.Name) == nil || volume(spec, netns.Name).HostPath == nil || volume(spec, netns.Name).HostPath.Path != "/var/run/netns":
		report("Envoy's /var/run/netns is not the host's")
	case !netns.ReadOnly || netns.MountPropagation == nil || *netns.MountPropagation != corev1.MountPropagationHostToContainer:
		report("Envoy's /var/run/netns must be read-only with HostToContainer propagation (a pod's namespace is mounted after Envoy starts): readOnly=%v propagation=%v", netns.ReadOnly, netns.MountPropagation)
	}

	sc := envoy.SecurityContext
	switch {
	case sc == nil || sc.Capabilities == nil:
		report("Envoy has no securityContext capabilities")
	case !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || !slices.Equal(sc.Capabilities.Add, []corev1.Capability{"SYS_ADMIN", "NET_ADMIN"}):
		report("Envoy's capabilities are drop %v add %v: want drop [ALL] add [SYS_ADMIN NET_ADMIN] (setns into the pods' network namespaces; SO_MARK on the sockets it opens there)",
			sc.Capabilities.Drop, sc.Capabilities.Add)
	case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
		report("Envoy's root filesystem is writable")
	case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.Privileged != nil && *sc.Privileged:
		report("Envoy may escalate its privileges (allowPrivilegeEscalation %v, privileged %v)", sc.AllowPrivilegeEscalation, sc.Privileged)
	case sc.RunAsGroup == nil || agentGroup(spec) == nil || *sc.RunAsGroup != *agentGroup(spec):
		report("Envoy does not run as the agent's group, which owns the xDS socket")
	}

	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken || mountAt(envoy, tokenMountPath) != nil {
		report("the agent's API credentials reach the Envoy container")
	}
	if mountAt(agent, tokenMountPath) == nil {
		report("the agent has no API credentials at %s", tokenMountPath)
	}

	_, adminPort, _ := net.SplitHostPort(xds.DefaultAdminAddress)
	if p := envoy.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Host != "127.0.0.1" || p.HTTPGet.Port.String() != adminPort {
		report("Envoy's readiness probe is not /ready on the loopback admin endpoint %s", xds.DefaultAdminAddress)
	}
	return problems
}

// TestEnvoyComponent renders config/default (with the node's Envoy) and config/base (the cluster
// tier's, without it): the first has an Envoy that meets envoyProblems' checks, the second none,
// and both agents' DaemonSets pass the real API server's validation (a server-side dry run).
// Negative controls: each broken copy of the Envoy is caught, and the dry run does validate (the
// API server refuses Bidirectional propagation in a container that is not privileged).
func TestEnvoyComponent(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t, ctx)
	line := protoLine(t)
	withEnvoy, without := renderAgent(t, "default"), renderAgent(t, "base")

	if problems := envoyProblems(withEnvoy, line); len(problems) > 0 {
		t.Errorf("config/default's node Envoy:\n%s", strings.Join(problems, "\n"))
	}
	if container(&without.Spec.Template.Spec, "envoy") != nil {
		t.Error("config/base, which the cluster tier deploys, has the Envoy container")
	}
	// (netns is the agent's own now, for capture: config/agent mounts it; see cni_config_test.go.)
	if volume(&without.Spec.Template.Spec, "envoy-bootstrap") != nil {
		t.Error("config/base has the Envoy's volume envoy-bootstrap")
	}
	if mountAt(container(&without.Spec.Template.Spec, "agent"), path.Dir(xds.DefaultXDSSocket)) == nil {
		t.Errorf("config/base's agent has no writable %s for its xDS socket (its root filesystem is read-only)", path.Dir(xds.DefaultXDSSocket))
	}

	for dir, ds := range map[string]*appsv1.DaemonSet{"default": withEnvoy, "base": without} {
		if err := dryRun(ctx, ds, ns); err != nil {
			t.Errorf("the API server refuses config/%s's agent DaemonSet: %v", dir, err)
		}
	}

	// Negative controls.
	for what, tc := range map[string]struct {
		breakIt func(*corev1.PodSpec)
		want    string
	}{
		"another line":   {func(s *corev1.PodSpec) { container(s, "envoy").Image = envoyImageRepo + ":v1.39.2" }, "on the line of the protos"},
		"a floating tag": {func(s *corev1.PodSpec) { container(s, "envoy").Image = envoyImageRepo + ":latest" }, "on the line of the protos"},
		"NET_RAW too": {func(s *corev1.PodSpec) {
			c := container(s, "envoy")
			c.SecurityContext.Capabilities.Add = append(c.SecurityContext.Capabilities.Add, "NET_RAW")
		}, "want drop [ALL] add [SYS_ADMIN NET_ADMIN]"},
		"no NET_ADMIN (no SO_MARK: the proxy's own upstream would be captured again)": {func(s *corev1.PodSpec) {
			c := container(s, "envoy")
			c.SecurityContext.Capabilities.Add = []corev1.Capability{"SYS_ADMIN"}
		}, "want drop [ALL] add [SYS_ADMIN NET_ADMIN]"},
		"no propagation":       {func(s *corev1.PodSpec) { mountAt(container(s, "envoy"), "/var/run/netns").MountPropagation = nil }, "HostToContainer"},
		"a writable bootstrap": {func(s *corev1.PodSpec) { mountAt(container(s, "envoy"), "/etc/envoy").ReadOnly = false }, "read-only for Envoy"},
		"no bootstrap flag":    {func(s *corev1.PodSpec) { container(s, "agent").Args = container(s, "agent").Args[:1] }, "no --envoy-bootstrap"},
		"the socket not shared": {func(s *corev1.PodSpec) {
			mountAt(container(s, "envoy"), "/var/run/aether").MountPath = "/run/elsewhere"
		}, "the xDS socket: /var/run/aether is not mounted in both"},
		"credentials in Envoy":   {func(s *corev1.PodSpec) { s.AutomountServiceAccountToken = nil }, "credentials reach the Envoy"},
		"a public admin probe":   {func(s *corev1.PodSpec) { container(s, "envoy").ReadinessProbe.HTTPGet.Host = "" }, "loopback admin endpoint"},
		"no Envoy (config/base)": {func(s *corev1.PodSpec) { s.Containers = s.Containers[:1] }, "no container envoy"},
	} {
		broken := withEnvoy.DeepCopy()
		tc.breakIt(&broken.Spec.Template.Spec)
		problems := strings.Join(envoyProblems(broken, line), "\n")
		if !strings.Contains(problems, tc.want) {
			t.Errorf("negative control %q: want a problem saying %q, got %q", what, tc.want, problems)
		}
	}
	bidirectional := withEnvoy.DeepCopy()
	mountAt(container(&bidirectional.Spec.Template.Spec, "envoy"), "/var/run/netns").MountPropagation = new(corev1.MountPropagationBidirectional)
	if err := dryRun(ctx, bidirectional, ns); err == nil || !strings.Contains(err.Error(), "Bidirectional mount propagation is available only to privileged containers") {
		t.Errorf("negative control: Envoy's /var/run/netns with Bidirectional propagation: want the API server's refusal, got %v", err)
	}
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
