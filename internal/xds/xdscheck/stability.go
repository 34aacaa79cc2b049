// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdscheck

import (
	"bytes"
	"fmt"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/aether-mesh/aether-operator/internal/xds"
)

// ListenersAndRoutesEqual is the stability gate: it compares the listeners and route
// configurations of two builds byte for byte (deterministic proto.Marshal) and returns one line
// per listener or route that is missing from one build or differs, naming the first field that
// differs. Given builds of two meshes that differ only in endpoints (health, addresses, members),
// it must return nil: Envoy drains a listener's connections when it is updated, so endpoint churn
// must reach EDS only.
func ListenersAndRoutesEqual(a, b xds.Resources) []string {
	out := sameResources("listener", a.Listeners, b.Listeners, (*listenerv3.Listener).GetName)
	return append(out, sameResources("route configuration", a.Routes, b.Routes, (*routev3.RouteConfiguration).GetName)...)
}

// Identical compares every resource of two builds byte for byte, as ListenersAndRoutesEqual
// does listeners and routes: the determinism check (the same mesh must give the same bytes).
func Identical(a, b xds.Resources) []string {
	out := sameResources("cluster", a.Clusters, b.Clusters, (*clusterv3.Cluster).GetName)
	out = append(out, sameResources("load assignment", a.Endpoints, b.Endpoints, (*endpointv3.ClusterLoadAssignment).GetClusterName)...)
	return append(out, ListenersAndRoutesEqual(a, b)...)
}

// Bytes is the deterministic wire form of m: the bytes the stability gate compares.
func Bytes(m proto.Message) ([]byte, error) {
	return proto.MarshalOptions{Deterministic: true}.Marshal(m)
}

func sameResources[T proto.Message](kind string, a, b []T, name func(T) string) []string {
	before := map[string]T{}
	for _, r := range a {
		before[name(r)] = r
	}
	var out []string
	seen := map[string]bool{}
	for _, r := range b {
		n := name(r)
		seen[n] = true
		old, ok := before[n]
		if !ok {
			out = append(out, resourceAt(kind, n)+": only in the second build")
			continue
		}
		x, errX := Bytes(old)
		y, errY := Bytes(r)
		if errX != nil || errY != nil {
			out = append(out, fmt.Sprintf("%s: cannot marshal: %v %v", resourceAt(kind, n), errX, errY))
			continue
		}
		if !bytes.Equal(x, y) {
			out = append(out, fmt.Sprintf("%s: differs (%d bytes, then %d) at %s", resourceAt(kind, n), len(x), len(y),
				firstDifference(old.ProtoReflect(), r.ProtoReflect(), "")))
		}
	}
	for _, r := range a {
		if !seen[name(r)] {
			out = append(out, resourceAt(kind, name(r))+": only in the first build")
		}
	}
	return out
}

// firstDifference follows the first differing field down (into sub-messages, list elements of
// equal-length lists and the messages inside Anys) and returns its path.
func firstDifference(a, b protoreflect.Message, at string) string {
	if x, ok := a.Interface().(*anypb.Any); ok {
		y := b.Interface().(*anypb.Any)
		ix, errX := x.UnmarshalNew()
		iy, errY := y.UnmarshalNew()
		if errX != nil || errY != nil || x.GetTypeUrl() != y.GetTypeUrl() {
			return at + " (the Any's type or bytes)"
		}
		if proto.Equal(ix, iy) {
			return at + " (the Any's bytes: equal messages packed differently, e.g. a map packed without Deterministic)"
		}
		return firstDifference(ix.ProtoReflect(), iy.ProtoReflect(), at+"<"+string(ix.ProtoReflect().Descriptor().Name())+">")
	}
	fields := a.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		va, vb := a.Get(fd), b.Get(fd)
		if a.Has(fd) == b.Has(fd) && va.Equal(vb) {
			continue
		}
		path := field(at, fd.Name())
		switch {
		case a.Has(fd) != b.Has(fd) || fd.IsMap() || !isMessage(fd):
			return path
		case fd.IsList():
			la, lb := va.List(), vb.List()
			if la.Len() != lb.Len() {
				return fmt.Sprintf("%s (%d elements, then %d)", path, la.Len(), lb.Len())
			}
			for j := range la.Len() {
				if d := firstDifference(la.Get(j).Message(), lb.Get(j).Message(), path+"["+label(la.Get(j).Message(), j)+"]"); d != "" {
					return d
				}
			}
		default:
			if d := firstDifference(va.Message(), vb.Message(), path); d != "" {
				return d
			}
		}
	}
	if at == "" {
		return "(no field differs: the bytes do)"
	}
	return ""
}
