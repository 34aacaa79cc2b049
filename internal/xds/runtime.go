// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xds

import (
	"strings"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	runtimev3 "github.com/envoyproxy/go-control-plane/envoy/service/runtime/v3"
	"google.golang.org/protobuf/types/known/structpb"
)

// One pod's share of the node's Envoy. The overload manager caps the node's downstream
// connections (MaxDownstreamConnections); without a cap of its own, one pod could open them all
// through its capture or proxy listener and lock every other pod of the node out of the mesh,
// its inbound traffic too. Envoy counts a listener's connections against a runtime key named
// after the listener (ListenerConnectionLimitKey), not a field of the Listener, so the agent
// serves those keys as a runtime layer of their own over ADS (RTDS): a pod's listeners and its
// key come and go in the same snapshot.
const (
	// PodListenerConnections is how many connections each pod's capture listener, and each pod's
	// proxy listener, holds at once; more are closed on accept (Envoy's
	// listener.<address>.downstream_cx_overflow counts them). 4 096 each: a pod at both limits
	// holds a sixth of the node's budget, so a node's other pods are served while one is at its
	// limit. Envoy may let a listener pass its limit by about one connection per worker thread.
	PodListenerConnections = 4096
	// ListenerLimitsLayer is the name of the RTDS layer (and of its one Runtime resource) that
	// holds the per-listener connection limits.
	ListenerLimitsLayer = "aether_listener_limits"
)

// ListenerConnectionLimitKey is the runtime key Envoy reads a listener's connection limit from.
func ListenerConnectionLimitKey(listener string) string {
	return "envoy.resource_limits.listener." + listener + ".connection_limit"
}

// podListenerLimits is the runtime layer holding PodListenerConnections for every capture and
// proxy listener of listeners.
func podListenerLimits(listeners []*listenerv3.Listener) *runtimev3.Runtime {
	fields := map[string]*structpb.Value{}
	for _, l := range listeners {
		if name := l.GetName(); strings.HasPrefix(name, CaptureListener("")) || strings.HasPrefix(name, ProxyListener("")) {
			fields[ListenerConnectionLimitKey(name)] = structpb.NewNumberValue(PodListenerConnections)
		}
	}
	return &runtimev3.Runtime{Name: ListenerLimitsLayer, Layer: &structpb.Struct{Fields: fields}}
}
