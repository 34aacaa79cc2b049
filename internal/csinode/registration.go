// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package csinode

import (
	"context"
	"fmt"
	"log"

	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// The kubelet's plugin registration: it watches DefaultRegistrationDir for sockets, asks each
// for its PluginInfo (GetInfo), validates and registers it, then reports the outcome back
// (NotifyRegistrationStatus). The plugin serves that itself, as the node-driver-registrar sidecar
// would, so the DaemonSet is one container from the operator's image.
const (
	DefaultRegistrationDir = "/var/lib/kubelet/plugins_registry"
	// DefaultCSISocket is where the kubelet dials the plugin's CSI services (the endpoint the
	// registration hands it, a path on the node).
	DefaultCSISocket = "/var/lib/kubelet/plugins/" + DriverName + "/csi.sock"
	// RegistrationSocketName is the registration socket's file name in the registration dir.
	RegistrationSocketName = DriverName + "-reg.sock"
)

// supportedVersions are the CSI versions the plugin speaks, as the kubelet validates them.
var supportedVersions = []string{"1.0.0"}

// Registration is the kubelet's plugin registration service for the CSI plugin.
type Registration struct {
	registerapi.UnimplementedRegistrationServer

	// Endpoint is the CSI socket's path on the node.
	Endpoint string
	Log      *log.Logger
	// Refused receives the kubelet's error when it refuses the plugin (buffered, one).
	Refused chan error
}

// NewRegistration serves the registration of the CSI plugin at endpoint.
func NewRegistration(endpoint string, logger *log.Logger) *Registration {
	return &Registration{Endpoint: endpoint, Log: logger, Refused: make(chan error, 1)}
}

// GetInfo tells the kubelet what the plugin is and where its CSI services are.
func (r *Registration) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	r.Log.Printf("the kubelet asks for the plugin's info: %s at %s", DriverName, r.Endpoint)
	return &registerapi.PluginInfo{
		Type:              registerapi.CSIPlugin,
		Name:              DriverName,
		Endpoint:          r.Endpoint,
		SupportedVersions: supportedVersions,
	}, nil
}

// NotifyRegistrationStatus logs the kubelet's verdict; a refusal goes to Refused, on which the
// command exits non-zero, so that its restart registers again.
func (r *Registration) NotifyRegistrationStatus(_ context.Context, st *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	if st.GetPluginRegistered() {
		r.Log.Printf("the kubelet registered %s", DriverName)
		return &registerapi.RegistrationStatusResponse{}, nil
	}
	err := fmt.Errorf("the kubelet refused to register %s: %s", DriverName, st.GetError())
	r.Log.Print(err)
	select {
	case r.Refused <- err:
	default:
	}
	return &registerapi.RegistrationStatusResponse{}, nil
}
