// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package webhook

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/aether-mesh/aether-operator/internal/csinode"
	"github.com/aether-mesh/aether-operator/internal/golden"
	"github.com/aether-mesh/aether-operator/internal/portspec"
	"github.com/aether-mesh/aether-operator/internal/proxyless"
	"github.com/aether-mesh/aether-operator/internal/testenv"
	"github.com/aether-mesh/aether-operator/internal/workloadidentity"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/inject/*.out.yaml and delete the orphaned ones")

// testIdentity is the suite's injector's: SPIRE, the gate on, an image of its own name.
var testIdentity = Identity{SPIRE: true, Gate: true, Image: "registry.example/aether-operator:test"}

// withoutSPIREPath serves, in this suite only, the injector of a mesh without SPIRE.
const withoutSPIREPath = InjectPath + "-without-spire"

const injectDir = "testdata/inject"

// TestInjectGolden: testdata/inject/<case>.in.yaml (a pod) → <case>.out.yaml (the pod as the
// injector of DefaultIdentity leaves it), for a review of every injected field.
func TestInjectGolden(t *testing.T) {
	cases := golden.Cases(t, injectDir, ".in.yaml")
	for _, name := range cases {
		t.Run(name, func(t *testing.T) {
			in, err := os.ReadFile(filepath.Join(injectDir, name+".in.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			p := &corev1.Pod{}
			if err := yaml.UnmarshalStrict(in, p); err != nil {
				t.Fatal(err)
			}
			spec, err := portspec.Parse(p.Annotations)
			if err != nil {
				t.Fatal(err)
			}
			warnings, err := (&PodInjector{Identity: DefaultIdentity()}).inject(p, spec)
			if err != nil || len(warnings) > 0 {
				t.Fatalf("inject: %v, warnings %q", err, warnings)
			}
			out, err := yaml.Marshal(p)
			if err != nil {
				t.Fatal(err)
			}
			golden.Compare(t, injectDir, name, ".out.yaml", out, *updateGolden)
		})
	}
	golden.Orphans(t, injectDir, cases, ".in.yaml", ".out.yaml", *updateGolden)
}

// TestGateSkip: the gate's rule, one reason per row; a mesh pod not named by any is gated.
func TestGateSkip(t *testing.T) {
	plain, hostNetwork := &corev1.Pod{}, &corev1.Pod{Spec: corev1.PodSpec{HostNetwork: true}}
	for name, tc := range map[string]struct {
		identity Identity
		pod      *corev1.Pod
		spec     portspec.Spec
		want     string
	}{
		"gated":                  {identity: DefaultIdentity(), pod: plain, want: ""},
		"proxyless, gated":       {identity: DefaultIdentity(), pod: plain, spec: portspec.Spec{Proxyless: portspec.ProxylessGRPC}, want: ""},
		"without SPIRE":          {identity: Identity{Gate: true}, pod: plain, want: "the mesh runs without SPIRE"},
		"the gate off":           {identity: Identity{SPIRE: true}, pod: plain, want: "the identity gate is off"},
		"opted out":              {identity: DefaultIdentity(), pod: plain, spec: portspec.Spec{NoIdentityGate: true}, want: `aether.io/identity-gate: "false"`},
		"hostNetwork":            {identity: DefaultIdentity(), pod: hostNetwork, want: "hostNetwork"},
		"without SPIRE, opted":   {identity: Identity{}, pod: hostNetwork, spec: portspec.Spec{NoIdentityGate: true}, want: "the mesh runs without SPIRE"},
		"opted out, hostNetwork": {identity: DefaultIdentity(), pod: hostNetwork, spec: portspec.Spec{NoIdentityGate: true}, want: `aether.io/identity-gate: "false"`},
	} {
		if got := tc.identity.gateSkip(tc.pod, tc.spec); got != tc.want {
			t.Errorf("%s: gateSkip = %q, want %q", name, got, tc.want)
		}
	}
}

// TestIdentityGateInjected: a mesh pod admitted by the real API server gets aether-identity-ready
// first among its init containers, before its own, running `aether-identity wait` on the node's
// Workload API socket, which is mounted into it alone; restricted, small, its last words its
// termination message.
func TestIdentityGateInjected(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t, ctx)
	p := pod(ns, true, nil)
	p.Spec.InitContainers = []corev1.Container{{Name: "migrate", Image: "registry.example/migrate:1"}}
	if err := env.Client.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	names := containerNames(p.Spec.InitContainers)
	if !slices.Equal(names, []string{GateContainer, "migrate"}) {
		t.Fatalf("init containers %v, want [%s migrate]", names, GateContainer)
	}
	gate := p.Spec.InitContainers[0]
	checkIdentityContainer(t, gate, "wait", "--socket="+workloadidentity.WorkloadSocketAddr)
	if gate.RestartPolicy != nil || gate.StartupProbe != nil {
		t.Errorf("the gate is a plain init container, not a sidecar: %+v", gate)
	}
	checkSocketOnlyIn(t, p, GateContainer)
	if sc := gate.SecurityContext; sc.RunAsUser == nil || *sc.RunAsUser != identityUser || sc.RunAsGroup == nil || *sc.RunAsGroup != identityUser {
		t.Errorf("the gate of a pod naming no user runs as %v:%v, want %d:%d", sc.RunAsUser, sc.RunAsGroup, identityUser, identityUser)
	}
}

// TestIdentityGatePassesPodSecurity: in a namespace that enforces Pod Security's restricted
// level, the API server's own PodSecurity admission takes a restricted mesh pod with the gate the
// injector adds (its socket an inline csi.aether.io volume); the control, the same pod with the
// socket a hostPath as the gate once mounted it, is refused naming the volume.
func TestIdentityGatePassesPodSecurity(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t, ctx)
	namespace := &corev1.Namespace{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: ns}, namespace); err != nil {
		t.Fatal(err)
	}
	namespace.Labels = map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}
	if err := env.Client.Update(ctx, namespace); err != nil {
		t.Fatal(err)
	}
	restricted := func() *corev1.Pod {
		p := pod(ns, true, nil)
		p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: new(true),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
		p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{AllowPrivilegeEscalation: new(false),
			Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}
		return p
	}
	p := restricted()
	if err := env.Client.Create(ctx, p); err != nil {
		t.Fatalf("a restricted mesh pod in a restricted namespace: %v", err)
	}
	if !hasContainer(p.Spec.InitContainers, GateContainer) {
		t.Fatalf("the pod was admitted without its gate: init containers %v", containerNames(p.Spec.InitContainers))
	}
	checkSocketOnlyIn(t, p, GateContainer)

	hostPath := restricted()
	hostPath.Spec.Volumes = []corev1.Volume{{Name: WorkloadSocketVolume, VolumeSource: corev1.VolumeSource{
		HostPath: &corev1.HostPathVolumeSource{Path: workloadidentity.NodeWorkloadSocketDir, Type: new(corev1.HostPathDirectory)}}}}
	err := env.Client.Create(ctx, hostPath)
	if err == nil || !strings.Contains(err.Error(), `violates PodSecurity "restricted:latest"`) ||
		!strings.Contains(err.Error(), `volume "`+WorkloadSocketVolume+`" uses restricted volume type "hostPath"`) {
		t.Errorf("the gate's socket as a hostPath: %v, want PodSecurity's refusal naming the volume", err)
	}
}

// TestIdentityGateNotInjected: a pod annotated aether.io/identity-gate: "false", a hostNetwork
// pod and a pod of a namespace the manager ignores (the injector is called for it, and adds
// nothing) get no identity container and no socket; the same pod without the reason gets the
// gate (the control).
func TestIdentityGateNotInjected(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t, ctx)
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: handlerIgnoredNamespace}}); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
	hostNetwork := pod(ns, true, nil)
	hostNetwork.Spec.HostNetwork = true
	for name, p := range map[string]*corev1.Pod{
		"opted out":          pod(ns, true, map[string]string{portspec.AnnotationIdentityGate: "false"}),
		"hostNetwork":        hostNetwork,
		"ignored namespace":  pod(handlerIgnoredNamespace, true, nil),
		"not in the mesh":    pod(ns, false, nil),
		"control: gated":     pod(ns, true, nil),
		"control: gate true": pod(ns, true, map[string]string{portspec.AnnotationIdentityGate: "true"}),
	} {
		before := injectorCalls(t, InjectPath)
		if err := env.Client.Create(ctx, p); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		gated := strings.HasPrefix(name, "control")
		if got := hasContainer(p.Spec.InitContainers, GateContainer) && hasVolume(p, WorkloadSocketVolume); got != gated {
			t.Errorf("%s: the gate and its socket injected: %v, want %v (%v, volumes %v)", name, got, gated, containerNames(p.Spec.InitContainers), p.Spec.Volumes)
		}
		if !gated && (len(p.Spec.InitContainers) != 0 || len(p.Spec.Volumes) != 0) {
			t.Errorf("%s: injected %v, volumes %v; want nothing", name, containerNames(p.Spec.InitContainers), p.Spec.Volumes)
		}
		if called := injectorCalls(t, InjectPath) > before; name == "ignored namespace" && !called {
			t.Errorf("%s: the injector was not called: the handler's rule was not exercised", name)
		}
	}
	// A value that is neither "true" nor "false" is the validator's to deny, with the parser's words.
	err := env.Client.Create(ctx, pod(ns, true, map[string]string{portspec.AnnotationIdentityGate: "no"}))
	if want := denied + `aether.io/identity-gate: "no": "no" is neither "true" nor "false"`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("aether.io/identity-gate: no: %v, want %q", err, want)
	}
}

// TestProxylessPodGetsIdentityFiles: a proxyless gRPC pod gets, after the gate, the native
// sidecar aether-identity (restartPolicy Always) keeping the certificate files in an emptyDir,
// with a startupProbe that holds the app containers until they are there; each app container
// mounts them read-only where its bootstrap's file_watcher reads them, but one that mounts its
// own there (kept, with a warning). The socket is in the gate and the sidecar only. Out of the
// gate, the sidecar comes first.
func TestProxylessPodGetsIdentityFiles(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t, ctx)
	c, warnings := warningClient(t)
	p := pod(ns, true, proxylessGRPC)
	p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: new(int64(1000)), FSGroup: new(int64(2000))}
	p.Spec.Volumes = []corev1.Volume{{Name: "own-certs", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "legacy", Image: "registry.example/legacy:1",
		VolumeMounts: []corev1.VolumeMount{{Name: "own-certs", MountPath: proxyless.IdentityDir}}})
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	if got := warnings.take(); !slices.ContainsFunc(got, func(w string) bool {
		return strings.Contains(w, "container legacy mounts own-certs at "+proxyless.IdentityDir+" itself: it is kept")
	}) {
		t.Errorf("warnings %q, want one about legacy's own certificate files", got)
	}

	if names := containerNames(p.Spec.InitContainers); !slices.Equal(names, []string{GateContainer, FilesContainer}) {
		t.Fatalf("init containers %v, want [%s %s]", names, GateContainer, FilesContainer)
	}
	files := p.Spec.InitContainers[1]
	checkIdentityContainer(t, files, "files", "--socket="+workloadidentity.WorkloadSocketAddr, "--dir="+proxyless.IdentityDir)
	if files.RestartPolicy == nil || *files.RestartPolicy != corev1.ContainerRestartPolicyAlways {
		t.Errorf("the files container's restartPolicy is %v, want Always (a native sidecar)", files.RestartPolicy)
	}
	if probe := files.StartupProbe; probe == nil || probe.Exec == nil ||
		!slices.Equal(probe.Exec.Command, []string{identityBinary, "probe", "--dir=" + proxyless.IdentityDir}) ||
		probe.PeriodSeconds*probe.FailureThreshold != 300 {
		t.Errorf("the files container's startupProbe is %+v, want exec aether-identity probe for 300 s", probe)
	}
	if !slices.ContainsFunc(files.VolumeMounts, func(m corev1.VolumeMount) bool {
		return m.Name == IdentityVolume && m.MountPath == proxyless.IdentityDir && !m.ReadOnly
	}) {
		t.Errorf("the files container mounts %+v, want %s writable at %s", files.VolumeMounts, IdentityVolume, proxyless.IdentityDir)
	}
	for _, c := range append(slices.Clone(p.Spec.InitContainers), p.Spec.Containers...) {
		if c.SecurityContext != nil && (c.Name == GateContainer || c.Name == FilesContainer) && c.SecurityContext.RunAsUser != nil {
			t.Errorf("%s runs as %d, want the pod's user (1000, inherited)", c.Name, *c.SecurityContext.RunAsUser)
		}
	}
	checkSocketOnlyIn(t, p, GateContainer, FilesContainer)

	v := volume(p, IdentityVolume)
	if v == nil || v.EmptyDir == nil || v.EmptyDir.Medium != corev1.StorageMediumMemory {
		t.Errorf("volume %s is %+v, want an emptyDir in memory", IdentityVolume, v)
	}
	app := p.Spec.Containers[0]
	if !slices.ContainsFunc(app.VolumeMounts, func(m corev1.VolumeMount) bool {
		return m.Name == IdentityVolume && m.MountPath == proxyless.IdentityDir && m.ReadOnly
	}) {
		t.Errorf("app mounts %+v, want %s read-only at %s", app.VolumeMounts, IdentityVolume, proxyless.IdentityDir)
	}
	// The bootstrap's file_watcher reads the files where the volume is mounted.
	var doc struct {
		Providers map[string]struct {
			Config map[string]string `json:"config"`
		} `json:"certificate_providers"`
	}
	if err := json.Unmarshal([]byte(expand(t, p, app, proxyless.EnvBootstrap)), &doc); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"certificate_file", "private_key_file", "ca_certificate_file"} {
		if f := doc.Providers[proxyless.CertificateProvider].Config[key]; filepath.Dir(f) != proxyless.IdentityDir {
			t.Errorf("the bootstrap's %s is %q, not in the mounted %s", key, f, proxyless.IdentityDir)
		}
	}
	if legacy := p.Spec.Containers[1]; slices.ContainsFunc(legacy.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == IdentityVolume }) {
		t.Errorf("legacy mounts %+v, want its own certificate files only", legacy.VolumeMounts)
	}

	// Out of the gate: the sidecar alone, first.
	out := pod(ns, true, map[string]string{portspec.AnnotationProxyless: portspec.ProxylessGRPC, portspec.AnnotationIdentityGate: "false"})
	out.Spec.InitContainers = []corev1.Container{{Name: "warm", Image: "registry.example/warm:1"}}
	if err := env.Client.Create(ctx, out); err != nil {
		t.Fatal(err)
	}
	if names := containerNames(out.Spec.InitContainers); !slices.Equal(names, []string{FilesContainer, "warm"}) {
		t.Errorf("out of the gate: init containers %v, want [%s warm]", names, FilesContainer)
	}
	checkSocketOnlyIn(t, out, FilesContainer)
}

// TestIdentityInjectedOnce: a pod created from the spec of an admitted one (which has the identity
// containers already) is admitted with them once: no container, volume or mount twice.
func TestIdentityInjectedOnce(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t, ctx)
	first := pod(ns, true, proxylessGRPC)
	if err := env.Client.Create(ctx, first); err != nil {
		t.Fatal(err)
	}
	again := pod(ns, true, proxylessGRPC)
	again.Spec = *first.Spec.DeepCopy()
	if err := env.Client.Create(ctx, again); err != nil {
		t.Fatal(err)
	}
	if !equalSpecs(first.Spec, again.Spec) {
		t.Errorf("re-admitted, the spec changed:\nfirst %s\nagain %s", toJSON(first.Spec), toJSON(again.Spec))
	}
	// The pure injector says the same.
	spec, err := portspec.Parse(again.Annotations)
	if err != nil {
		t.Fatal(err)
	}
	twice := again.DeepCopy()
	if w, err := (&PodInjector{Identity: testIdentity}).inject(twice, spec); err != nil || len(w) > 0 || !equalPods(again, twice) {
		t.Errorf("injecting an injected pod: %v, %q, changed: %v", err, w, !equalPods(again, twice))
	}
}

// TestNoIdentityWithoutSPIRE: the injector of a mesh without SPIRE (the suite's withoutSPIREPath,
// where the injector's configuration is pointed for this test) gives a mesh pod no gate, and a
// proxyless pod its bootstrap but no identity container, no socket and no files volume.
func TestNoIdentityWithoutSPIRE(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t, ctx)
	original := setInjectorURL(t, ctx, func(url string) string { return strings.Replace(url, InjectPath, withoutSPIREPath, 1) })
	defer func() {
		setInjectorURL(t, ctx, func(string) string { return original })
		testenv.Eventually(t, "the injector with SPIRE is back", func() error {
			p := pod(ns, true, nil)
			if err := env.Client.Create(ctx, p); err != nil {
				return err
			}
			if !hasContainer(p.Spec.InitContainers, GateContainer) {
				return fmt.Errorf("a mesh pod got no gate")
			}
			return nil
		})
	}()
	testenv.Eventually(t, "the API server calls the injector without SPIRE", func() error {
		before := injectorCalls(t, withoutSPIREPath)
		p := pod(ns, true, proxylessGRPC)
		if err := env.Client.Create(ctx, p); err != nil {
			return err
		}
		if injectorCalls(t, withoutSPIREPath) == before {
			return fmt.Errorf("the injector without SPIRE was not called")
		}
		if len(p.Spec.InitContainers) != 0 || hasVolume(p, WorkloadSocketVolume) || hasVolume(p, IdentityVolume) {
			t.Fatalf("without SPIRE, a proxyless pod got %v, volumes %v; want no identity container", containerNames(p.Spec.InitContainers), p.Spec.Volumes)
		}
		if !hasVolume(p, ProxylessVolume) {
			t.Fatalf("without SPIRE, a proxyless pod lost its bootstrap's socket: volumes %v", p.Spec.Volumes)
		}
		return nil
	})
	p := pod(ns, true, nil)
	if err := env.Client.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	if len(p.Spec.InitContainers) != 0 || len(p.Spec.Volumes) != 0 {
		t.Errorf("without SPIRE, a mesh pod got %v, volumes %v; want nothing", containerNames(p.Spec.InitContainers), p.Spec.Volumes)
	}
}

// checkIdentityContainer: c runs aether-identity with args from the suite's image, mounts the
// Workload API socket directory read-only where the socket address points, is restricted and
// small, and its last log lines are its termination message.
func checkIdentityContainer(t *testing.T, c corev1.Container, args ...string) {
	t.Helper()
	if want := append([]string{identityBinary}, args...); c.Image != testIdentity.Image || !slices.Equal(c.Command, want) {
		t.Errorf("%s runs %s %q, want %s %q", c.Name, c.Image, c.Command, testIdentity.Image, want)
	}
	if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
		return m.Name == WorkloadSocketVolume && m.MountPath == workloadidentity.NodeWorkloadSocketDir && m.ReadOnly
	}) || !strings.HasPrefix(workloadidentity.WorkloadSocketAddr, "unix://"+workloadidentity.NodeWorkloadSocketDir+"/") {
		t.Errorf("%s mounts %+v, want %s read-only at %s", c.Name, c.VolumeMounts, WorkloadSocketVolume, workloadidentity.NodeWorkloadSocketDir)
	}
	sc := c.SecurityContext
	if sc == nil || !ptr.Deref(sc.RunAsNonRoot, false) || !ptr.Deref(sc.ReadOnlyRootFilesystem, false) || ptr.Deref(sc.AllowPrivilegeEscalation, true) ||
		sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) != 0 ||
		ptr.Deref(sc.Privileged, false) || sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("%s's security context is %+v, want restricted", c.Name, sc)
	}
	if !equalResources(c.Resources, identityResources) {
		t.Errorf("%s's resources are %+v, want %+v", c.Name, c.Resources, identityResources)
	}
	if c.TerminationMessagePolicy != corev1.TerminationMessageFallbackToLogsOnError {
		t.Errorf("%s's termination message policy is %s", c.Name, c.TerminationMessagePolicy)
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil || e.ValueFrom.FieldRef == nil {
			t.Errorf("%s's %s is not from the downward API", c.Name, e.Name)
		}
	}
}

// checkSocketOnlyIn: the Workload API socket volume is the node's directory, and only the named
// containers mount it.
func checkSocketOnlyIn(t *testing.T, p *corev1.Pod, names ...string) {
	t.Helper()
	v := volume(p, WorkloadSocketVolume)
	if v == nil || v.CSI == nil || v.CSI.Driver != csinode.DriverName || !ptr.Deref(v.CSI.ReadOnly, false) ||
		!maps.Equal(v.CSI.VolumeAttributes, map[string]string{csinode.VolumeAttribute: csinode.VolumeSPIREAgentSockets}) {
		t.Errorf("volume %s is %+v, want a read-only %s volume of %s: %s", WorkloadSocketVolume, v, csinode.DriverName,
			csinode.VolumeAttribute, csinode.VolumeSPIREAgentSockets)
	}
	var mounting []string
	for _, c := range append(slices.Clone(p.Spec.InitContainers), p.Spec.Containers...) {
		if slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
			return m.Name == WorkloadSocketVolume || strings.HasPrefix(m.MountPath, workloadidentity.NodeWorkloadSocketDir)
		}) {
			mounting = append(mounting, c.Name)
		}
	}
	if !slices.Equal(mounting, names) {
		t.Errorf("the Workload API socket is mounted into %v, want %v only", mounting, names)
	}
}

// setInjectorURL sets the pod injector's configuration's URL to to(its URL) and returns the URL
// it had.
func setInjectorURL(t *testing.T, ctx context.Context, to func(string) string) string {
	t.Helper()
	var was string
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cfg := &admissionregistrationv1.MutatingWebhookConfiguration{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: "mutating-webhook-configuration"}, cfg); err != nil {
			return err
		}
		if len(cfg.Webhooks) != 1 || cfg.Webhooks[0].ClientConfig.URL == nil {
			return fmt.Errorf("want one webhook with a URL (envtest's), got %+v", cfg.Webhooks)
		}
		was = *cfg.Webhooks[0].ClientConfig.URL
		cfg.Webhooks[0].ClientConfig.URL = new(to(was))
		return env.Client.Update(ctx, cfg)
	})
	if err != nil {
		t.Fatal(err)
	}
	return was
}

// injectorCalls is how many admission requests the handler at path has served.
func injectorCalls(t *testing.T, path string) float64 {
	t.Helper()
	n, err := testenv.Counter("controller_runtime_webhook_requests_total", "webhook", path)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func containerNames(cs []corev1.Container) []string {
	names := make([]string, len(cs))
	for i, c := range cs {
		names[i] = c.Name
	}
	return names
}

func volume(p *corev1.Pod, name string) *corev1.Volume {
	if i := slices.IndexFunc(p.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == name }); i >= 0 {
		return &p.Spec.Volumes[i]
	}
	return nil
}

func hasVolume(p *corev1.Pod, name string) bool { return volume(p, name) != nil }

func equalResources(a, b corev1.ResourceRequirements) bool {
	same := func(x, y corev1.ResourceList) bool {
		if len(x) != len(y) {
			return false
		}
		for k, v := range x {
			if w, ok := y[k]; !ok || v.Cmp(w) != 0 {
				return false
			}
		}
		return true
	}
	return same(a.Requests, b.Requests) && same(a.Limits, b.Limits)
}

func equalSpecs(a, b corev1.PodSpec) bool { return toJSON(a) == toJSON(b) }

func toJSON(v any) string {
	raw, _ := json.Marshal(v)
	return string(raw)
}
