// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package webhook

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/aether-mesh/aether-operator/internal/csinode"
	"github.com/aether-mesh/aether-operator/internal/portspec"
	"github.com/aether-mesh/aether-operator/internal/proxyless"
	"github.com/aether-mesh/aether-operator/internal/workloadidentity"
)

// The identity containers the injector adds to a mesh pod, and their volumes.
const (
	// GateContainer, first among a mesh pod's init containers, runs `aether-identity wait`: the
	// pod's other containers start once SPIRE has issued the pod its X.509 SVID.
	GateContainer = "aether-identity-ready"
	// FilesContainer, a native sidecar of a proxyless gRPC pod, runs `aether-identity files`:
	// the pod's certificate files, from its SVID, in IdentityVolume.
	FilesContainer = "aether-identity"
	// WorkloadSocketVolume is the node's SPIRE Workload API socket directory (an inline
	// csi.aether.io volume of SPIRE's agent sockets, read-only), mounted into GateContainer and
	// FilesContainer only.
	WorkloadSocketVolume = "aether-spire-workload-api"
	// IdentityVolume holds a proxyless pod's certificate files (an emptyDir in memory): written
	// by FilesContainer, read-only in the app containers at proxyless.IdentityDir.
	IdentityVolume = "aether-identity"

	// DefaultIdentityImage is the image holding /aether-identity: the operator's.
	DefaultIdentityImage = "docker.io/aether/operator:dev"
)

// identityBinary is aether-identity's path in the operator image.
const identityBinary = "/aether-identity"

// identityUser is the uid (and gid) the identity containers run as when the pod names no
// non-root user of its own: the operator image's nonroot user.
const identityUser int64 = 65532

// probeBudget is how long FilesContainer's startupProbe may fail before the kubelet restarts it
// (period × failureThreshold): the gate's own bound (aether-identity wait's default --timeout).
const (
	probePeriodSeconds    = 1
	probeFailureThreshold = 300
)

// identityResources are each identity container's: it holds one gRPC stream and a few KiB of
// PEM (about 11 MiB resident, measured while waiting), and works for a moment per rotation.
var identityResources = corev1.ResourceRequirements{
	Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("5m"), corev1.ResourceMemory: resource.MustParse("16Mi")},
	Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
}

// Identity is what the pod injector gives mesh pods of the identity SPIRE issues them.
type Identity struct {
	// SPIRE says SPIRE issues the mesh's workload identities: its agent serves the Workload API
	// on every node (workloadidentity.NodeWorkloadSocketDir). False when the mesh runs without an issuer:
	// then nothing below is injected, since there is nothing to ask.
	SPIRE bool
	// Gate injects GateContainer into every mesh pod (but those the gate never takes, gateSkip);
	// false turns the gate off mesh-wide.
	Gate bool
	// Image is the image of the identity containers: the operator's, which holds
	// /aether-identity.
	Image string
}

// DefaultIdentity is SPIRE with the gate on, from the default operator image.
func DefaultIdentity() Identity {
	return Identity{SPIRE: true, Gate: true, Image: DefaultIdentityImage}
}

// gateSkip says why pod, in the mesh with spec, does not get the gate, or "" when it does.
func (id Identity) gateSkip(pod *corev1.Pod, spec portspec.Spec) string {
	switch {
	case !id.SPIRE:
		return "the mesh runs without SPIRE"
	case !id.Gate:
		return "the identity gate is off"
	case spec.NoIdentityGate:
		return fmt.Sprintf("%s: %q", portspec.AnnotationIdentityGate, portspec.IdentityGateOff)
	case pod.Spec.HostNetwork:
		return "hostNetwork"
	}
	return ""
}

// InjectGate puts GateContainer first among pod's init containers, with the Workload API socket
// mounted into it alone. A pod that has it already is left as it is.
func InjectGate(pod *corev1.Pod, image string) {
	if hasContainer(pod.Spec.InitContainers, GateContainer) {
		return
	}
	addWorkloadSocketVolume(pod)
	gate := identityContainer(pod, GateContainer, image, "wait", "--socket="+workloadidentity.WorkloadSocketAddr)
	pod.Spec.InitContainers = slices.Insert(pod.Spec.InitContainers, 0, gate)
}

// InjectIdentityFiles gives a proxyless gRPC pod its certificate files from its SVID:
// FilesContainer, a native sidecar (an init container that keeps running) right after the gate
// (first without it), writing them into IdentityVolume; its startupProbe passes once they are
// there, so the app containers start with them. Every app container mounts the volume read-only
// at proxyless.IdentityDir, where the bootstrap's file_watcher reads them; a container that
// mounts something there itself keeps it, with a warning (returned). A pod that has the
// sidecar already is left as it is.
func InjectIdentityFiles(pod *corev1.Pod, image string) []string {
	if hasContainer(pod.Spec.InitContainers, FilesContainer) {
		return nil
	}
	addWorkloadSocketVolume(pod)
	if !slices.ContainsFunc(pod.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == IdentityVolume }) {
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: IdentityVolume, VolumeSource: corev1.VolumeSource{
			EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: new(resource.MustParse("1Mi"))}}})
	}
	sidecar := identityContainer(pod, FilesContainer, image, "files", "--socket="+workloadidentity.WorkloadSocketAddr, "--dir="+proxyless.IdentityDir)
	sidecar.RestartPolicy = new(corev1.ContainerRestartPolicyAlways)
	sidecar.VolumeMounts = append(sidecar.VolumeMounts, corev1.VolumeMount{Name: IdentityVolume, MountPath: proxyless.IdentityDir})
	sidecar.StartupProbe = &corev1.Probe{
		ProbeHandler:     corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{identityBinary, "probe", "--dir=" + proxyless.IdentityDir}}},
		PeriodSeconds:    probePeriodSeconds,
		FailureThreshold: probeFailureThreshold,
		TimeoutSeconds:   5,
	}
	at := 0
	if len(pod.Spec.InitContainers) > 0 && pod.Spec.InitContainers[0].Name == GateContainer {
		at = 1
	}
	pod.Spec.InitContainers = slices.Insert(pod.Spec.InitContainers, at, sidecar)

	var warnings []string
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		if j := slices.IndexFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == proxyless.IdentityDir }); j >= 0 {
			if c.VolumeMounts[j].Name != IdentityVolume {
				warnings = append(warnings, fmt.Sprintf("container %s mounts %s at %s itself: it is kept, and its gRPC clients read "+
					"the certificate files there, not the SVID SPIRE issues the pod", c.Name, c.VolumeMounts[j].Name, proxyless.IdentityDir))
			}
			continue
		}
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: IdentityVolume, MountPath: proxyless.IdentityDir, ReadOnly: true})
	}
	return warnings
}

// identityContainer runs aether-identity with args, as the pod, with the Workload API socket
// mounted read-only at the path it has on the node.
func identityContainer(pod *corev1.Pod, name, image string, args ...string) corev1.Container {
	field := func(path string) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}
	}
	return corev1.Container{
		Name:    name,
		Image:   image,
		Command: append([]string{identityBinary}, args...),
		// What its messages name: the pod's MeshService, its SPIRE selectors, its node.
		Env: []corev1.EnvVar{
			{Name: workloadidentity.EnvNamespace, ValueFrom: field("metadata.namespace")},
			{Name: workloadidentity.EnvServiceAccount, ValueFrom: field("spec.serviceAccountName")},
			{Name: workloadidentity.EnvNodeName, ValueFrom: field("spec.nodeName")},
		},
		VolumeMounts:    []corev1.VolumeMount{{Name: WorkloadSocketVolume, MountPath: workloadidentity.NodeWorkloadSocketDir, ReadOnly: true}},
		Resources:       identityResources,
		SecurityContext: identitySecurityContext(pod),
		// A failed gate's last words (why, and where to look) are its termination message:
		// `kubectl describe pod` shows them.
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
}

// identitySecurityContext is the identity containers' (Pod Security Standards "restricted"):
// non-root, no privilege escalation, no capabilities, a read-only root filesystem, the runtime's
// seccomp profile. SPIRE's agent makes the Workload API socket mode 0777, so any uid may
// connect to it. They run as the pod's user when the pod names a non-root one (the certificate
// files are then its own), else as identityUser.
func identitySecurityContext(pod *corev1.Pod) *corev1.SecurityContext {
	sc := &corev1.SecurityContext{
		RunAsNonRoot:             new(true),
		ReadOnlyRootFilesystem:   new(true),
		AllowPrivilegeEscalation: new(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	podSC := pod.Spec.SecurityContext
	if podSC == nil || podSC.RunAsUser == nil || *podSC.RunAsUser == 0 {
		sc.RunAsUser = new(identityUser)
		if podSC == nil || podSC.RunAsGroup == nil {
			sc.RunAsGroup = new(identityUser)
		}
	}
	return sc
}

// addWorkloadSocketVolume adds the node's Workload API socket directory as WorkloadSocketVolume,
// unless pod has it: an inline csi.aether.io volume that the node plugin binds read-only from
// SPIRE's agent socket directory. Not a hostPath, which Pod Security's baseline and restricted
// levels refuse: a mesh pod must start in a namespace that enforces them. On a node without
// SPIRE's agent the plugin refuses the volume and the pod waits (FailedMount) rather than start
// without its identity.
func addWorkloadSocketVolume(pod *corev1.Pod) {
	if slices.ContainsFunc(pod.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == WorkloadSocketVolume }) {
		return
	}
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: WorkloadSocketVolume, VolumeSource: corev1.VolumeSource{
		CSI: &corev1.CSIVolumeSource{Driver: csinode.DriverName, ReadOnly: new(true),
			VolumeAttributes: map[string]string{csinode.VolumeAttribute: csinode.VolumeSPIREAgentSockets}}}})
}

func hasContainer(containers []corev1.Container, name string) bool {
	return slices.ContainsFunc(containers, func(c corev1.Container) bool { return c.Name == name })
}
