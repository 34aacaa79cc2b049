// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package registration

import (
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/aether-mesh/aether-operator/internal/csinode"
	"github.com/aether-mesh/aether-operator/internal/portspec"
)

// UDSDriver is the CSI driver of the one supported socket carrier: the mesh's node plugin, which
// mounts a per-pod tmpfs at <root>/<pod UID> on the node and binds it into the pod.
const UDSDriver = csinode.DriverName

// UDSReason says why a pod's socket delivery cannot happen: the label of the agent's
// aether_agent_uds_resolve_failures_total.
type UDSReason string

// The reasons, as the workload page names them.
const (
	// UDSNotCSI: the named volume is declared, but not as csi.aether.io (an old emptyDir).
	UDSNotCSI UDSReason = "not_csi"
	// UDSVolumeNotDeclared: the pod declares no volume of the name.
	UDSVolumeNotDeclared UDSReason = "volume_not_declared"
	// UDSBadFile: the value is not <volume>/<socket-file> (a policy's, unjudged at admission).
	UDSBadFile UDSReason = "bad_file"
	// UDSPathTooLong: the socket's node path does not fit a Unix socket address.
	UDSPathTooLong UDSReason = "path_too_long"
	// UDSMultipleCSIVolumes: the pod declares more than one csi.aether.io volume.
	UDSMultipleCSIVolumes UDSReason = "multiple_csi_volumes"
	// UDSNoUID: the pod has no UID yet, so its socket has no node path.
	UDSNoUID UDSReason = "no_uid"
	// UDSBadRequest: the pod's csi.aether.io volume is one the plugin refuses to mount: the pod
	// sets no spec.securityContext.fsGroup, which owns the socket directory.
	UDSBadRequest UDSReason = "bad_request"
	// UDSDisabled: the agent reads no socket declaration (--uds-csi=false, chart udsCsi.enabled).
	UDSDisabled UDSReason = "disabled"
)

// AllUDSReasons lists every reason, for a metric exported at zero and for tests.
func AllUDSReasons() []UDSReason {
	return []UDSReason{UDSNotCSI, UDSVolumeNotDeclared, UDSBadFile, UDSPathTooLong, UDSMultipleCSIVolumes, UDSNoUID, UDSBadRequest, UDSDisabled}
}

// UDSError is why a pod's socket delivery cannot happen: a reason and a message naming the
// field, the value and the fix.
type UDSError struct {
	Reason  UDSReason
	Message string
}

func (e *UDSError) Error() string { return e.Message }

// udsCarrierFix is what a pod is told to declare.
const udsCarrierFix = "declare it as an inline csi: {driver: " + UDSDriver + "} volume, the only socket carrier, and mount it where the app binds its socket"

// csiVolumes are the names of pod's csi.aether.io inline volumes that carry its socket
// directory: not the one of SPIRE's agent sockets, which the identity gate mounts.
func csiVolumes(pod *corev1.Pod) []string {
	var names []string
	for _, v := range pod.Spec.Volumes {
		if v.CSI != nil && v.CSI.Driver == UDSDriver && v.CSI.VolumeAttributes[csinode.VolumeAttribute] != csinode.VolumeSPIREAgentSockets {
			names = append(names, v.Name)
		}
	}
	return names
}

// CheckUDSVolumes judges pod's csi.aether.io volumes, whatever it delivers to: at most one, and
// only with spec.securityContext.fsGroup set (the plugin makes the socket directory
// root:<fsGroup>, mode 2770). Its error is a *UDSError.
func CheckUDSVolumes(pod *corev1.Pod) error {
	names := csiVolumes(pod)
	switch {
	case len(names) > 1:
		return &UDSError{Reason: UDSMultipleCSIVolumes, Message: fmt.Sprintf(
			"spec.volumes: %q are all %s volumes; a pod has at most one (keep one, mount it into every container that needs the socket, "+
				"and name it in %s)", names, UDSDriver, portspec.AnnotationUDSSocket)}
	case len(names) == 1 && (pod.Spec.SecurityContext == nil || pod.Spec.SecurityContext.FSGroup == nil):
		return &UDSError{Reason: UDSBadRequest, Message: fmt.Sprintf(
			"spec.securityContext.fsGroup: unset, and volume %q is a %s volume, whose socket directory the fsGroup owns (set "+
				"spec.securityContext.fsGroup to a group the app runs with, for example 65532; there is no world-writable fallback)",
			names[0], UDSDriver)}
	}
	return nil
}

// CheckUDSSocket judges the socket a pod is told to serve on (field is where the value comes
// from: the annotation's key, or the policy's field) against its volumes: the named volume must be
// the pod's csi.aether.io volume. Its error is a *UDSError.
func CheckUDSSocket(pod *corev1.Pod, field string, socket portspec.UDSSocket) error {
	if err := CheckUDSVolumes(pod); err != nil {
		return err
	}
	for _, v := range pod.Spec.Volumes {
		if v.Name != socket.Volume {
			continue
		}
		if v.CSI != nil && v.CSI.Driver == UDSDriver {
			return nil
		}
		return &UDSError{Reason: UDSNotCSI, Message: fmt.Sprintf("%s: %q: volume %q is %s, not a %s volume (%s)",
			field, socket.String(), socket.Volume, volumeKind(v), UDSDriver, udsCarrierFix)}
	}
	return &UDSError{Reason: UDSVolumeNotDeclared, Message: fmt.Sprintf("%s: %q: the pod declares no volume %q (name the pod's %s "+
		"volume, or add a volume %q: %s)", field, socket.String(), socket.Volume, UDSDriver, socket.Volume, udsCarrierFix)}
}

// volumeKind names what a volume is, for a message.
func volumeKind(v corev1.Volume) string {
	switch {
	case v.EmptyDir != nil:
		return "an emptyDir (no longer a socket carrier)"
	case v.HostPath != nil:
		return "a hostPath"
	case v.CSI != nil:
		return fmt.Sprintf("a csi volume of driver %q", v.CSI.Driver)
	case v.ConfigMap != nil, v.Secret != nil, v.Projected != nil, v.DownwardAPI != nil:
		return "a configuration volume"
	case v.PersistentVolumeClaim != nil, v.Ephemeral != nil:
		return "a persistent volume"
	}
	return "another kind of volume"
}

// UDSDelivery is how a pod's inbound is delivered, as ResolveUDS decides it.
type UDSDelivery struct {
	// Path is the socket's path on the node, where the proxy dials it; empty for TCP delivery.
	Path string
	// Source says where the declaration came from: the annotation, or "EndpointPolicy <name>".
	Source string
}

// UDSInputs are what ResolveUDS reads of a pod besides the pod itself.
type UDSInputs struct {
	// Enabled is whether the node delivers to sockets at all (the agent's --uds-csi).
	Enabled bool
	// Root is where the plugin mounts the pods' socket directories on the node
	// (portspec.UDSHostRoot unless configured otherwise).
	Root string
	// Annotated is the pod's own declaration (portspec.Spec.UDSSocket); nil when it has none.
	Annotated *portspec.UDSSocket
	// Policy, when Annotated is nil, is the winning EndpointPolicy's spec.udsSocket of a Service
	// that selects the pod, and PolicyName its name; PolicyName is empty when none applies.
	Policy, PolicyName string
}

// ResolveUDS decides where pod's inbound is delivered: the pod's own annotation wins, else the
// policy's socket; neither is TCP delivery (a zero UDSDelivery, nil). A declaration that cannot
// be served is a *UDSError with its reason, and the pod keeps TCP delivery.
func ResolveUDS(pod *corev1.Pod, in UDSInputs) (UDSDelivery, error) {
	var (
		socket portspec.UDSSocket
		field  string
		d      UDSDelivery
	)
	switch {
	case in.Annotated != nil:
		socket, field, d.Source = *in.Annotated, portspec.AnnotationUDSSocket, "annotation "+portspec.AnnotationUDSSocket
	case in.PolicyName != "":
		field, d.Source = "EndpointPolicy "+in.PolicyName+" spec.udsSocket", "EndpointPolicy "+in.PolicyName
		parsed, err := portspec.ParseUDSSocket(field, in.Policy)
		var perr *portspec.Error
		switch {
		case errors.As(err, &perr) && perr.Kind == portspec.KindUDSFileTooLong:
			return UDSDelivery{}, &UDSError{Reason: UDSPathTooLong, Message: err.Error()}
		case err != nil:
			return UDSDelivery{}, &UDSError{Reason: UDSBadFile, Message: err.Error()}
		}
		socket = parsed
	default:
		return UDSDelivery{}, nil
	}
	if !in.Enabled {
		return UDSDelivery{}, &UDSError{Reason: UDSDisabled, Message: fmt.Sprintf("%s: %q: this node delivers to no Unix socket "+
			"(the agent runs with --uds-csi=false; enable udsCsi in the chart), so the pod is delivered over TCP", field, socket.String())}
	}
	if err := CheckUDSSocket(pod, field, socket); err != nil {
		return UDSDelivery{}, err
	}
	if pod.UID == "" {
		return UDSDelivery{}, &UDSError{Reason: UDSNoUID, Message: fmt.Sprintf("%s: %q: the pod has no UID, so its socket has no "+
			"node path (%s/<pod UID>/%s); it is resolved again when it has one", field, socket.String(), in.Root, socket.File)}
	}
	d.Path = socket.HostPath(in.Root, string(pod.UID))
	if len(d.Path) > portspec.MaxUnixPath {
		return UDSDelivery{}, &UDSError{Reason: UDSPathTooLong, Message: fmt.Sprintf("%s: %q: the socket's node path %s is %d bytes "+
			"long, over the %d bytes of a Unix socket address (shorten the socket file name, or the agent's --uds-root)",
			field, socket.String(), strings.TrimSpace(d.Path), len(d.Path), portspec.MaxUnixPath)}
	}
	return d, nil
}
