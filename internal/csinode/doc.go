// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Package csinode is csi.aether.io, the mesh's CSI node plugin: the carrier of an app's Unix
// socket. For each pod with an inline csi.aether.io volume it mounts a tmpfs at
// /run/aether/uds/<pod-uid> (nosuid,nodev,noexec,nosymfollow, 1 MiB by default), owned
// root:<the pod's fsGroup>, mode 2770, and binds it onto the volume's target path in the pod; the
// node's proxy dials the socket the app creates there, and sees nothing else of the pod.
//
// The fsGroup reaches the plugin because it advertises the node capability VOLUME_MOUNT_GROUP:
// the kubelet then passes spec.securityContext.fsGroup as
// volume_capability.mount.volume_mount_group in NodePublishVolume, and changes no ownership
// itself. A pod without an fsGroup is refused (FailedPrecondition, naming the fix). The pod's UID
// comes from the volume context, which the kubelet fills when the CSIDriver has
// podInfoOnMount: true. Only inline ephemeral volumes are served.
//
// The plugin registers itself with the kubelet through the kubelet's plugin registration socket
// directory (Serve), so it needs no registrar sidecar, and reads nothing from the API server.
package csinode
