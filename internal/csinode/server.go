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
	Log      *log.Logger
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
