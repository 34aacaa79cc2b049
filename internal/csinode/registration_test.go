// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package csinode

import (
	"context"
	"io"
	"log"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// TestKubeletRegistersThePlugin plays the kubelet's plugin watcher against the plugin's
// registration socket, over real gRPC: GetInfo, then the calls the kubelet's CSI handler makes on
// the endpoint it was given, then the kubelet's verdict. A refusal ends Serve with the kubelet's
// error (the command then exits non-zero, and its restart registers again); the registration
// socket is gone afterwards, which is how the kubelet learns the plugin left.
func TestKubeletRegistersThePlugin(t *testing.T) {
	n := startNode(t)
	ctx := context.Background()
	regPath := filepath.Join(n.sockets.RegistrationDir, RegistrationSocketName)
	kubelet := registerapi.NewRegistrationClient(dial(t, regPath))

	info, err := kubelet.GetInfo(ctx, &registerapi.InfoRequest{})
	if err != nil {
		t.Fatalf("GetInfo: %v", err)
	}
	if info.GetType() != registerapi.CSIPlugin || info.GetName() != DriverName || info.GetEndpoint() != n.sockets.CSI ||
		!slices.Contains(info.GetSupportedVersions(), "1.0.0") {
		t.Fatalf("GetInfo = %v, want a %s named %s at %s supporting 1.0.0", info, registerapi.CSIPlugin, DriverName, n.sockets.CSI)
	}

	// The kubelet dials the endpoint GetInfo named.
	conn := dial(t, info.GetEndpoint())
	plugin, err := csi.NewIdentityClient(conn).GetPluginInfo(ctx, &csi.GetPluginInfoRequest{})
	if err != nil || plugin.GetName() != DriverName {
		t.Errorf("GetPluginInfo = %v, %v; want %s", plugin, err, DriverName)
	}
	nodeInfo, err := csi.NewNodeClient(conn).NodeGetInfo(ctx, &csi.NodeGetInfoRequest{})
	if err != nil || nodeInfo.GetNodeId() != "node-a" {
		t.Errorf("NodeGetInfo = %v, %v; want node ID node-a, the node's name", nodeInfo, err)
	}
	caps, err := csi.NewNodeClient(conn).NodeGetCapabilities(ctx, &csi.NodeGetCapabilitiesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	// What the kubelet's csiDriverClient.NodeSupportsVolumeMountGroup looks for before it passes
	// the pod's fsGroup.
	if !slices.ContainsFunc(caps.GetCapabilities(), func(c *csi.NodeServiceCapability) bool {
		return c.GetRpc().GetType() == csi.NodeServiceCapability_RPC_VOLUME_MOUNT_GROUP
	}) {
		t.Errorf("NodeGetCapabilities = %v, without VOLUME_MOUNT_GROUP: the kubelet would not pass the fsGroup", caps)
	}

	if _, err := kubelet.NotifyRegistrationStatus(ctx, &registerapi.RegistrationStatus{PluginRegistered: true}); err != nil {
		t.Fatalf("NotifyRegistrationStatus(registered): %v", err)
	}
	if _, err := kubelet.NotifyRegistrationStatus(ctx, &registerapi.RegistrationStatus{
		PluginRegistered: false, Error: "highest supported version is 0.3.0",
	}); err != nil {
		t.Fatalf("NotifyRegistrationStatus(refused): %v", err)
	}
	served := <-n.served
	n.served <- nil // for the cleanup
	if served == nil || !strings.Contains(served.Error(), "highest supported version is 0.3.0") {
		t.Errorf("Serve after the kubelet refused the plugin: %v, want the kubelet's error", served)
	}
	if _, err := os.Lstat(regPath); !os.IsNotExist(err) {
		t.Errorf("the registration socket %s is still there after Serve returned (%v)", regPath, err)
	}
}

// TestServeReplacesStaleSockets: sockets a killed plugin left are replaced; anything else at a
// socket's path is left alone and named.
func TestServeReplacesStaleSockets(t *testing.T) {
	root, err := os.MkdirTemp("", "csinode")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(root) })
	s := Sockets{CSI: filepath.Join(root, "csi.sock"), RegistrationDir: filepath.Join(root, "reg")}
	if err := os.MkdirAll(s.RegistrationDir, 0o750); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{s.CSI, filepath.Join(s.RegistrationDir, RegistrationSocketName)} {
		l, err := net.Listen("unix", p)
		if err != nil {
			t.Fatal(err)
		}
		l.(*net.UnixListener).SetUnlinkOnClose(false) // as a killed process leaves it
		_ = l.Close()
	}
	srv := &Server{NodeName: "node-a", Volumes: Volumes{Dir: filepath.Join(root, "uds"), Size: DefaultSize}, Log: log.New(io.Discard, "", 0)}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- Serve(ctx, srv, s) }()
	// Bounded: if Serve failed on the stale sockets, nothing will ever listen.
	callCtx, callCancel := context.WithTimeout(ctx, 30*time.Second)
	defer callCancel()
	info, err := registerapi.NewRegistrationClient(dial(t, filepath.Join(s.RegistrationDir, RegistrationSocketName))).
		GetInfo(callCtx, &registerapi.InfoRequest{})
	if err != nil || info.GetEndpoint() != s.CSI {
		t.Errorf("GetInfo over the replaced socket: %v, %v", info, err)
	}
	cancel()
	if err := <-served; err != nil {
		t.Errorf("Serve: %v", err)
	}

	if err := os.WriteFile(s.CSI, []byte("not a socket"), 0o600); err != nil {
		t.Fatal(err)
	}
	err = Serve(context.Background(), srv, s)
	if err == nil || !strings.Contains(err.Error(), s.CSI+" exists and is not a socket") {
		t.Errorf("Serve with a file at the CSI socket's path: %v, want it named and left alone", err)
	}
	if b, _ := os.ReadFile(s.CSI); string(b) != "not a socket" {
		t.Errorf("the file at %s was changed: %q", s.CSI, b)
	}
}
