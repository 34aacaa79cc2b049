// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package v1alpha1_test

import (
	"fmt"
	"path"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/aether-mesh/aether-operator/internal/cni"
)

// The CNI plugin's installation (config/agent): the init container install-cni, the host's
// directories, and exactly the capabilities capture needs.

// hostDirs are the host directories the agent's pod mounts, by volume, and where each goes.
var hostDirs = map[string]struct{ host, container string }{
	"cni-run":  {cni.DefaultRunDir, cni.DefaultRunDir}, // at its host path: the plugin uses the paths the agent gives
	"cni-bin":  {"/opt/cni/bin", "/host/opt/cni/bin"},
	"cni-conf": {"/etc/cni/net.d", "/host/etc/cni/net.d"},
	"netns":    {"/var/run/netns", "/var/run/netns"}, // at its host path: CNI_NETNS is the host's
}

func initContainer(spec *corev1.PodSpec, name string) *corev1.Container {
	for i := range spec.InitContainers {
		if spec.InitContainers[i].Name == name {
			return &spec.InitContainers[i]
		}
	}
	return nil
}

// flag is the value of --name in c's arguments (the last one, as the flag package reads them),
// or "" when c has none.
func flag(c *corev1.Container, name string) string {
	value := ""
	for _, arg := range c.Args {
		if v, ok := strings.CutPrefix(arg, "--"+name+"="); ok {
			value = v
		}
	}
	return value
}

// cniProblems lists how ds falls short of installing and serving the CNI plugin.
func cniProblems(ds *appsv1.DaemonSet) []string {
	spec := &ds.Spec.Template.Spec
	var problems []string
	report := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	install, agent := initContainer(spec, "install-cni"), container(spec, "agent")
	if install == nil || agent == nil {
		return []string{fmt.Sprintf("the agent's pod lacks the init container install-cni (%v) or the agent (%v)", install != nil, agent != nil)}
	}
	if command := strings.Join(install.Command, " "); command != "/agent install-cni" || install.Image != agent.Image {
		report("install-cni runs %q from %s: want /agent install-cni from the agent's image %s", command, install.Image, agent.Image)
	}

	for name, dir := range hostDirs {
		v := volume(spec, name)
		if v == nil || v.HostPath == nil || v.HostPath.Path != dir.host {
			report("volume %s is not the host's %s", name, dir.host)
		}
		m := mountAt(agent, dir.container)
		if m == nil || m.Name != name {
			report("the agent does not mount %s at %s", name, dir.container)
		}
		if name != "netns" && (mountAt(install, dir.container) == nil || mountAt(install, dir.container).Name != name) {
			report("install-cni does not mount %s at %s", name, dir.container)
		}
	}
	if m := mountAt(agent, "/var/run/netns"); m != nil && (!m.ReadOnly || m.MountPropagation == nil || *m.MountPropagation != corev1.MountPropagationHostToContainer) {
		report("the agent's /var/run/netns must be read-only with HostToContainer propagation (a pod's namespace is mounted after the agent starts): readOnly=%v propagation=%v", m.ReadOnly, m.MountPropagation)
	}

	// Both containers say the same to the plugin, and where it runs on the host.
	for _, f := range []string{"cni-socket", "cni-kubeconfig", "cni-conf-dir", "cni-bin-dir", "ignored-namespaces"} {
		if a, i := flag(agent, f), flag(install, f); a != i {
			report("--%s differs: the agent's %q, install-cni's %q (the entry install-cni writes is the one the agent keeps)", f, a, i)
		}
	}
	for _, f := range []string{"cni-socket", "cni-kubeconfig"} {
		if p := flag(agent, f); path.Dir(p) != cni.DefaultRunDir {
			report("--%s %q is not in the agent's CNI directory %s (the host path the plugin reads)", f, p, cni.DefaultRunDir)
		}
	}
	if flag(agent, "cni-conf-dir") != hostDirs["cni-conf"].container || flag(agent, "cni-bin-dir") != hostDirs["cni-bin"].container {
		report("the agent's --cni-conf-dir/--cni-bin-dir are not its mounts of the node's CNI dirs")
	}
	for _, env := range []string{"POD_NAME", "POD_NAMESPACE"} {
		if !slices.ContainsFunc(agent.Env, func(e corev1.EnvVar) bool { return e.Name == env && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil }) {
			report("the agent has no %s from the downward API: it cannot find its DaemonSet when it stops", env)
		}
	}

	problems = append(problems, privileges(agent, []corev1.Capability{"NET_ADMIN", "SYS_ADMIN", "DAC_OVERRIDE"})...)
	problems = append(problems, privileges(install, nil)...)
	return problems
}

// privileges checks that c runs as root without root's powers: every capability dropped but add,
// no escalation, a read-only root.
func privileges(c *corev1.Container, add []corev1.Capability) []string {
	sc := c.SecurityContext
	switch {
	case sc == nil || sc.Capabilities == nil:
		return []string{c.Name + " has no securityContext capabilities"}
	case !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || !slices.Equal(sc.Capabilities.Add, add):
		return []string{fmt.Sprintf("%s's capabilities are drop %v add %v: want drop [ALL] add %v", c.Name, sc.Capabilities.Drop, sc.Capabilities.Add, add)}
	case sc.Privileged != nil && *sc.Privileged:
		return []string{c.Name + " is privileged"}
	case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
		return []string{c.Name + " may escalate its privileges"}
	case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
		return []string{c.Name + "'s root filesystem is writable"}
	}
	return nil
}

// TestCNIInstallation renders config/base and config/default: both install the plugin from the
// agent's image with the mounts and flags it needs and exactly NET_ADMIN and SYS_ADMIN for the
// agent; both installers have the agent's credentials (they write the plugin's kubeconfig).
// (envoy_config_test.go checks that the node's Envoy mounts none of the CNI directory.) Negative
// controls: each broken copy is caught.
func TestCNIInstallation(t *testing.T) {
	withEnvoy, base := renderAgent(t, "default"), renderAgent(t, "base")
	for dir, ds := range map[string]*appsv1.DaemonSet{"default": withEnvoy, "base": base} {
		if problems := cniProblems(ds); len(problems) > 0 {
			t.Errorf("config/%s:\n%s", dir, strings.Join(problems, "\n"))
		}
	}
	for dir, ds := range map[string]*appsv1.DaemonSet{"default": withEnvoy, "base": base} {
		if spec := &ds.Spec.Template.Spec; !credentialed(spec, initContainer(spec, "install-cni")) {
			t.Errorf("config/%s's install-cni has no API credentials (the pod's token is neither automounted nor mounted there): it cannot write the plugin's kubeconfig", dir)
		}
	}

	for what, tc := range map[string]struct {
		breakIt func(*corev1.PodSpec)
		want    string
	}{
		"no installer": {func(s *corev1.PodSpec) { s.InitContainers = nil }, "lacks the init container install-cni"},
		"NET_RAW too": {func(s *corev1.PodSpec) {
			c := container(s, "agent")
			c.SecurityContext.Capabilities.Add = append(c.SecurityContext.Capabilities.Add, "NET_RAW")
		}, "want drop [ALL] add [NET_ADMIN SYS_ADMIN DAC_OVERRIDE]"},
		"no DAC_OVERRIDE (the probe of an app's 0660 socket is refused)": {func(s *corev1.PodSpec) {
			container(s, "agent").SecurityContext.Capabilities.Add = []corev1.Capability{"NET_ADMIN", "SYS_ADMIN"}
		}, "want drop [ALL] add [NET_ADMIN SYS_ADMIN DAC_OVERRIDE]"},
		"no SYS_ADMIN": {func(s *corev1.PodSpec) {
			container(s, "agent").SecurityContext.Capabilities.Add = []corev1.Capability{"NET_ADMIN"}
		}, "want drop [ALL] add [NET_ADMIN SYS_ADMIN DAC_OVERRIDE]"},
		"a privileged installer": {func(s *corev1.PodSpec) {
			initContainer(s, "install-cni").SecurityContext.Capabilities.Add = []corev1.Capability{"DAC_OVERRIDE"}
		}, "install-cni's capabilities"},
		"no propagation": {func(s *corev1.PodSpec) { mountAt(container(s, "agent"), "/var/run/netns").MountPropagation = nil }, "HostToContainer"},
		"another socket": {func(s *corev1.PodSpec) {
			c := initContainer(s, "install-cni")
			c.Args = append(c.Args, "--cni-socket=/run/elsewhere.sock")
		}, "--cni-socket differs"},
		"the run dir moved": {func(s *corev1.PodSpec) { volume(s, "cni-run").HostPath.Path = "/var/lib/aether" }, "volume cni-run is not the host's"},
	} {
		broken := withEnvoy.DeepCopy()
		tc.breakIt(&broken.Spec.Template.Spec)
		problems := strings.Join(cniProblems(broken), "\n")
		if !strings.Contains(problems, tc.want) {
			t.Errorf("negative control %q: want a problem saying %q, got %q", what, tc.want, problems)
		}
	}
}
