// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/aether-mesh/aether-operator/internal/portspec"
	"github.com/aether-mesh/aether-operator/internal/proxyless"
	"github.com/aether-mesh/aether-operator/internal/registration"
)

// InjectPath is where the pod injector is served; config/webhook names the same path.
const InjectPath = "/mutate--v1-pod"

// ProxylessVolume is the name of the volume the injector adds: the node's proxyless xDS socket.
const ProxylessVolume = "aether-proxyless-xds"

// PodInjector prepares a mesh pod (aether.io/managed: "true") at creation.
//
// The identity gate: every mesh pod gets, first among its init containers, aether-identity-ready
// (GateContainer), which waits until SPIRE's Workload API returns an X.509 SVID for the pod,
// saying every 10 s what it waits for, and fails closed after a bound (aether-identity wait), so
// that the app's first request already has an identity. The node's Workload API socket
// directory is mounted into it alone. Not injected when the mesh runs without SPIRE or with the
// gate off (Identity), into a pod annotated aether.io/identity-gate: "false", into hostNetwork
// pods, or in the namespaces the mesh never takes.
//
// Proxyless gRPC: a mesh pod annotated aether.io/proxyless: "grpc" gets, in every container,
//
//   - AETHER_POD_NAMESPACE and AETHER_POD_NAME (the downward API), then
//   - GRPC_XDS_BOOTSTRAP_CONFIG, grpc-go's bootstrap: node ID $(AETHER_POD_NAMESPACE)/$(AETHER_POD_NAME)
//     (the kubelet expands it: a pod created from a generateName has no name yet when it is
//     admitted), metadata announcing a proxyless client that sends SNI, the agent's proxyless
//     socket unix:///var/run/aether/xds.sock, and the file_watcher certificate provider reading
//     the pod's SVID, key and trust bundle from /var/run/secrets/aether/identity;
//   - GRPC_EXPERIMENTAL_XDS_SNI=true: grpc-go then sends the SNI each cluster names, which selects
//     the destination's port (without it, every connection lands on the destination's primary);
//   - the node's /var/run/aether-proxyless, mounted read-only at /var/run/aether (a hostPath of
//     type Directory: on a node whose agent does not serve proxyless clients the pod does not
//     start, rather than start without its mesh);
//   - with SPIRE, /var/run/secrets/aether/identity read-only: the certificate files, from the
//     pod's SVID, kept current by the native sidecar aether-identity (FilesContainer, after the
//     gate), whose startupProbe holds the app containers until they are there. So the client
//     library speaks mTLS with the same identity the node's proxy would. Without SPIRE, whoever
//     deploys the pod mounts its certificate files there (svid.pem, svid_key.pem, bundle.pem).
//
// What a container sets itself is kept (an env variable of the same name, a mount at the same
// path), with a warning. The pod's annotations are read by internal/portspec (the one parser); a
// pod whose annotations do not parse is left as it is, for the validator to deny. Only CREATE is
// mutated: a pod's containers cannot change afterwards. A pod that has the injected containers
// already (a copy of an admitted pod's spec) is not given them twice.
type PodInjector struct {
	Decoder admission.Decoder
	// Ignored are the namespaces the mesh never takes (the validator's rule).
	Ignored registration.IgnoredNamespaces
	// Identity is what mesh pods are given of their SPIRE identity.
	Identity Identity
}

// Handle answers one pod CREATE: the injection as a patch, or the pod as it is.
func (i *PodInjector) Handle(_ context.Context, req admission.Request) admission.Response {
	pod := &corev1.Pod{}
	if err := i.Decoder.Decode(req, pod); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if i.Ignored.Ignores(req.Namespace) {
		return admission.Allowed("namespace " + req.Namespace + " is not part of the mesh (--ignored-namespaces)")
	}
	if !portspec.IsManaged(pod.Labels) {
		return admission.Allowed("not managed")
	}
	spec, err := portspec.Parse(pod.Annotations)
	if err != nil {
		return admission.Allowed("the mesh annotations do not parse; the validator judges them")
	}
	injected := pod.DeepCopy()
	warnings, err := i.inject(injected, spec)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	if equality.Semantic.DeepEqual(pod, injected) {
		return admission.Allowed("nothing to inject").WithWarnings(warnings...)
	}
	raw, err := json.Marshal(injected)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	return admission.PatchResponseFromRaw(req.Object.Raw, raw).WithWarnings(warnings...)
}

// inject adds to pod, in the mesh with spec, what PodInjector says, and returns the warnings.
func (i *PodInjector) inject(pod *corev1.Pod, spec portspec.Spec) ([]string, error) {
	if i.Identity.gateSkip(pod, spec) == "" {
		InjectGate(pod, i.Identity.Image)
	}
	if spec.Proxyless != portspec.ProxylessGRPC {
		return nil, nil
	}
	warnings, err := InjectProxyless(pod)
	if err != nil {
		return nil, err
	}
	if i.Identity.SPIRE {
		warnings = append(warnings, InjectIdentityFiles(pod, i.Identity.Image)...)
	}
	return warnings, nil
}

// InjectProxyless adds to pod what a proxyless gRPC client needs (PodInjector), and returns a
// warning for each thing a container had set itself and keeps. A pod that has the volume already
// is left as it is (injected before).
func InjectProxyless(pod *corev1.Pod) ([]string, error) {
	if slices.ContainsFunc(pod.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == ProxylessVolume }) {
		return nil, nil
	}
	bootstrap, err := proxyless.Default().JSON()
	if err != nil {
		return nil, err
	}
	directory := corev1.HostPathDirectory
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: ProxylessVolume, VolumeSource: corev1.VolumeSource{
		HostPath: &corev1.HostPathVolumeSource{Path: proxyless.NodeSocketDir, Type: &directory}}})
	// In this order: a $(VAR) reference expands only a variable defined before it.
	env := []corev1.EnvVar{
		{Name: proxyless.EnvPodNamespace, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
		{Name: proxyless.EnvPodName, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		{Name: proxyless.EnvBootstrap, Value: string(bootstrap)},
		{Name: proxyless.EnvSNI, Value: "true"},
	}
	var warnings []string
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		for _, e := range env {
			if slices.ContainsFunc(c.Env, func(have corev1.EnvVar) bool { return have.Name == e.Name }) {
				warnings = append(warnings, fmt.Sprintf("container %s sets %s itself: it is kept, and %s: %q may not work as intended",
					c.Name, e.Name, portspec.AnnotationProxyless, portspec.ProxylessGRPC))
				continue
			}
			c.Env = append(c.Env, e)
		}
		if slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == proxyless.SocketDir }) {
			warnings = append(warnings, fmt.Sprintf("container %s mounts something at %s itself: it is kept, and its gRPC clients cannot reach the node agent's xDS socket",
				c.Name, proxyless.SocketDir))
			continue
		}
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: ProxylessVolume, MountPath: proxyless.SocketDir, ReadOnly: true})
	}
	return warnings, nil
}
