// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package csinode

import (
	"context"
	"errors"
	"fmt"
	"log"
	"strconv"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/aether-mesh/aether-operator/internal/version"
)

// DriverName is the plugin's CSI name: the driver of the pods' inline volumes and of the
// CSIDriver object.
const DriverName = "csi.aether.io"

// VolumeAttribute is the key, in a csi.aether.io volume's volumeAttributes, of what it carries:
// unset, the pod's own socket directory (a tmpfs per pod); VolumeSPIREAgentSockets, the node's
// SPIRE agent socket directory, bound read-only. One driver for both, not a second driver name:
// one CSIDriver object and one registration with the kubelet, and no claim on csi.spiffe.io,
// which a cluster may run the SPIFFE CSI driver under.
const VolumeAttribute = "aether.io/volume"

// VolumeSPIREAgentSockets is the VolumeAttribute value of the node's SPIRE agent socket
// directory: the identity containers' way to the Workload API without a hostPath volume, which
// Pod Security's baseline and restricted levels refuse. Any pod may mount it, as any pod may dial
// the Workload API: SPIRE attests the caller's process, not the path it came by.
const VolumeSPIREAgentSockets = "spire-agent-sockets"

// The volume context the kubelet adds to an inline volume's NodePublishVolume when the CSIDriver
// has podInfoOnMount: true.
const (
	ctxPodUID       = "csi.storage.k8s.io/pod.uid"
	ctxPodName      = "csi.storage.k8s.io/pod.name"
	ctxPodNamespace = "csi.storage.k8s.io/pod.namespace"
	ctxEphemeral    = "csi.storage.k8s.io/ephemeral"
)

// Server is the plugin's Identity and Node services.
type Server struct {
	csi.UnimplementedIdentityServer
	csi.UnimplementedNodeServer

	NodeName string
	Volumes  Volumes
	// SPIREAgentSockets is the node's SPIRE agent socket directory, as the plugin sees it: what a
	// VolumeSPIREAgentSockets volume binds. "": such volumes are refused.
	SPIREAgentSockets string
	Log               *log.Logger
}

// GetPluginInfo names the driver.
func (s *Server) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: DriverName, VendorVersion: version.Get().Version}, nil
}

// GetPluginCapabilities returns none: a node plugin only, no controller service, no topology.
func (s *Server) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	return &csi.GetPluginCapabilitiesResponse{}, nil
}

// Probe answers ready as soon as the plugin serves.
func (s *Server) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	return &csi.ProbeResponse{}, nil
}

// NodeGetCapabilities advertises VOLUME_MOUNT_GROUP, the one capability that makes the kubelet
// hand the pod's fsGroup to the plugin: with it the kubelet sets
// volume_capability.mount.volume_mount_group to spec.securityContext.fsGroup on every
// NodePublishVolume and leaves the volume's ownership to the plugin (it changes no permissions
// itself); without it the plugin never learns the fsGroup.
func (s *Server) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	return &csi.NodeGetCapabilitiesResponse{Capabilities: []*csi.NodeServiceCapability{{
		Type: &csi.NodeServiceCapability_Rpc{Rpc: &csi.NodeServiceCapability_RPC{
			Type: csi.NodeServiceCapability_RPC_VOLUME_MOUNT_GROUP,
		}},
	}}}, nil
}

// NodeGetInfo names the node: the node ID is the node's name.
func (s *Server) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	return &csi.NodeGetInfoResponse{NodeId: s.NodeName}, nil
}

// NodePublishVolume mounts the pod's socket directory onto the volume's target path. Inline
// ephemeral volumes only, and only for a pod with an fsGroup.
func (s *Server) NodePublishVolume(_ context.Context, req *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume_id is empty")
	}
	if req.GetTargetPath() == "" {
		return nil, status.Error(codes.InvalidArgument, "target_path is empty")
	}
	mnt := req.GetVolumeCapability().GetMount()
	if mnt == nil {
		return nil, status.Errorf(codes.InvalidArgument,
			"volume %s: volume_capability is %v, want a mount volume: %s serves a directory, not a block device", req.GetVolumeId(), req.GetVolumeCapability(), DriverName)
	}
	vc := req.GetVolumeContext()
	if vc[ctxEphemeral] != "true" {
		return nil, status.Errorf(codes.InvalidArgument,
			"volume %s: %s serves inline ephemeral volumes only (%s=%q): declare it in the pod, volumes: [{name: ..., csi: {driver: %s}}], not as a PersistentVolume",
			req.GetVolumeId(), DriverName, ctxEphemeral, vc[ctxEphemeral], DriverName)
	}
	uid := vc[ctxPodUID]
	if uid == "" {
		return nil, status.Errorf(codes.FailedPrecondition,
			"volume %s: no %s in the volume context: the CSIDriver %s must have spec.podInfoOnMount: true", req.GetVolumeId(), ctxPodUID, DriverName)
	}
	pod := vc[ctxPodNamespace] + "/" + vc[ctxPodName]
	if !podUIDPattern.MatchString(uid) {
		return nil, status.Errorf(codes.InvalidArgument, "pod %s: %s %q is not a Kubernetes UID", pod, ctxPodUID, uid)
	}
	switch kind := vc[VolumeAttribute]; kind {
	case "": // the pod's socket directory, below
	case VolumeSPIREAgentSockets:
		return s.publishSPIREAgentSockets(req, pod)
	default:
		return nil, status.Errorf(codes.InvalidArgument,
			"pod %s: volumeAttributes %s: %q is no volume %s serves: leave it out for the pod's socket directory, or set %q for SPIRE's agent socket directory (read-only)",
			pod, VolumeAttribute, kind, DriverName, VolumeSPIREAgentSockets)
	}
	if mnt.GetVolumeMountGroup() == "" {
		return nil, status.Errorf(codes.FailedPrecondition,
			"pod %s has no fsGroup: the %s volume's socket directory is owned by the pod's fsGroup (mode 2770, no world-writable fallback): set spec.securityContext.fsGroup",
			pod, DriverName)
	}
	gid, err := strconv.ParseUint(mnt.GetVolumeMountGroup(), 10, 32)
	if err != nil || gid == 1<<32-1 {
		return nil, status.Errorf(codes.InvalidArgument, "pod %s: volume_mount_group %q is not a group ID", pod, mnt.GetVolumeMountGroup())
	}
	if err := s.Volumes.Publish(uid, uint32(gid), req.GetTargetPath(), req.GetReadonly()); err != nil {
		if errors.Is(err, errInUse) {
			return nil, status.Errorf(codes.FailedPrecondition, "pod %s: one %s volume per pod: %v", pod, DriverName, err)
		}
		if errors.Is(err, errKernel) {
			return nil, status.Errorf(codes.FailedPrecondition, "pod %s: %v", pod, err)
		}
		return nil, status.Errorf(codes.Internal, "pod %s: %v", pod, err)
	}
	s.Log.Printf("published pod %s (uid %s) socket directory %s, group %d, onto %s", pod, uid, s.Volumes.PodDir(uid), gid, req.GetTargetPath())
	return &csi.NodePublishVolumeResponse{}, nil
}

// publishSPIREAgentSockets binds the node's SPIRE agent socket directory onto the volume's
// target, read-only whatever the pod asked: the socket is the node's, the pod only dials it.
func (s *Server) publishSPIREAgentSockets(req *csi.NodePublishVolumeRequest, pod string) (*csi.NodePublishVolumeResponse, error) {
	if s.SPIREAgentSockets == "" {
		return nil, status.Errorf(codes.FailedPrecondition,
			"pod %s: %s=%s: the %s plugin of node %s runs without --spire-agent-sockets, so it carries no SPIRE socket directory (install it with SPIRE, or turn the identity gate off)",
			pod, VolumeAttribute, VolumeSPIREAgentSockets, DriverName, s.NodeName)
	}
	if err := s.Volumes.PublishNodeDirectory(s.SPIREAgentSockets, req.GetTargetPath()); err != nil {
		if errors.Is(err, errNoDirectory) || errors.Is(err, errKernel) {
			// The kubelet retries: the pod waits in ContainerCreating, as it did for a hostPath of
			// type Directory on a node whose SPIRE agent has not started.
			return nil, status.Errorf(codes.FailedPrecondition, "pod %s: %v", pod, err)
		}
		return nil, status.Errorf(codes.Internal, "pod %s: %v", pod, err)
	}
	s.Log.Printf("published pod %s SPIRE's agent socket directory %s, read-only, onto %s", pod, s.SPIREAgentSockets, req.GetTargetPath())
	return &csi.NodePublishVolumeResponse{}, nil
}

// NodeUnpublishVolume unmounts the bind and the pod's tmpfs and removes its directory.
func (s *Server) NodeUnpublishVolume(_ context.Context, req *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	if req.GetVolumeId() == "" || req.GetTargetPath() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume_id and target_path are required")
	}
	if err := s.Volumes.Unpublish(req.GetTargetPath()); err != nil {
		return nil, status.Error(codes.Internal, fmt.Sprintf("volume %s: %v", req.GetVolumeId(), err))
	}
	s.Log.Printf("unpublished volume %s from %s", req.GetVolumeId(), req.GetTargetPath())
	return &csi.NodeUnpublishVolumeResponse{}, nil
}
