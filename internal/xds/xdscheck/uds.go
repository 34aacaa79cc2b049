// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdscheck

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/proto"

	"github.com/aether-mesh/aether-operator/internal/portspec"
	"github.com/aether-mesh/aether-operator/internal/xds"
)

// UDSDelivery checks delivery to pods that serve on a Unix socket (the workload page's "Serving
// on a Unix domain socket"): such a pod's inbound delivers every declared port to its one socket,
// so
//   - a pod one of whose app clusters delivers to a pipe delivers every port to that same pipe,
//     one host each (a port left on the pod's address reaches nothing: a socket-serving app has
//     no TCP listener);
//   - no two pods deliver to one pipe (each pod's socket lives in its own directory);
//   - a pipe's path fits a Unix socket address (107 bytes): Envoy rejects a longer one, and the
//     whole cluster update with it;
//   - nothing else holds a pipe: a peer's endpoint, a mesh cluster or a listener is reached over
//     the network, never through a node path.
func UDSDelivery(res xds.Resources) []string {
	var out []string
	type delivery struct{ cluster, to string }
	byPod := map[string][]delivery{}
	owner := map[string]string{} // pipe → the pod delivering to it
	for _, c := range res.Clusters {
		target, ok := xds.ParseCluster(c.GetName())
		if !ok || !target.Inbound {
			continue
		}
		pod := target.Pod
		var hosts []string
		for _, l := range c.GetLoadAssignment().GetEndpoints() {
			for _, e := range l.GetLbEndpoints() {
				hosts = append(hosts, addressText(e.GetEndpoint().GetAddress()))
			}
		}
		byPod[pod] = append(byPod[pod], delivery{c.GetName(), strings.Join(hosts, ",")})
	}
	for _, pod := range slices.Sorted(maps.Keys(byPod)) {
		ds := byPod[pod]
		pipe := ""
		for _, d := range ds {
			if strings.HasPrefix(d.to, "pipe:") && pipe == "" {
				pipe = d.to
			}
		}
		if pipe == "" {
			continue
		}
		for _, d := range ds {
			if d.to != pipe {
				out = append(out, fmt.Sprintf("%s: delivers to %s, but pod %s serves on %s: every declared port of a pod that serves on a Unix socket is delivered to it",
					resourceAt("cluster", d.cluster), d.to, pod, pipe))
			}
		}
		path := strings.TrimPrefix(pipe, "pipe:")
		if len(path) > portspec.MaxUnixPath {
			out = append(out, fmt.Sprintf("pod %s: its socket %s is %d bytes long, over the %d bytes of a Unix socket address: Envoy rejects the cluster",
				pod, path, len(path), portspec.MaxUnixPath))
		}
		if other, taken := owner[pipe]; taken {
			out = append(out, fmt.Sprintf("pods %s and %s both deliver to %s: each pod's socket is its own", other, pod, path))
		}
		owner[pipe] = pod
	}
	inbound := map[string]bool{}
	for _, c := range res.Clusters {
		if target, ok := xds.ParseCluster(c.GetName()); ok && target.Inbound {
			inbound[resourceAt("cluster", c.GetName())] = true
		}
	}
	out = append(out, walk(res, func(at string, m proto.Message, _ bool) {
		resource, _, _ := strings.Cut(at, ": ")
		if a, ok := m.(*corev3.Address); ok && a.GetPipe() != nil && !inbound[resource] {
			out = append(out, fmt.Sprintf("%s: holds pipe %s: only a pod's inbound delivers to a Unix socket", at, a.GetPipe().GetPath()))
		}
	})...)
	return out
}

// addressText renders an endpoint's address: pipe:<path>, or <ip>:<port>.
func addressText(a *corev3.Address) string {
	if p := a.GetPipe(); p != nil {
		return "pipe:" + p.GetPath()
	}
	return fmt.Sprintf("%s:%d", a.GetSocketAddress().GetAddress(), a.GetSocketAddress().GetPortValue())
}
