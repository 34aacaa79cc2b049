// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xds

import (
	"cmp"
	"fmt"
	"slices"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
)

// PodResources are the resources of a node's configuration res that pod namespace/name's proxy
// uses, read by the builder's names: the pod's listeners (CaptureListener, ProxyListener,
// InboundListener), the route configurations they name by RDS, the clusters those listeners and
// route configurations send to, and those clusters' load assignments. It is what the node agent
// shows of one pod (kubectl aether proxy-config): res's own messages, nothing recomputed. Skipped
// carries no note. Secrets are never among them (Resources holds none). A pod with no listener in
// res gets empty Resources: it has no proxy on this node (yet).
func PodResources(res Resources, namespace, name string) (Resources, error) {
	key := PodKey(namespace, name)
	var out Resources
	for _, l := range res.Listeners {
		switch l.GetName() {
		case CaptureListener(key), ProxyListener(key), InboundListener(key):
			out.Listeners = append(out.Listeners, l)
		}
	}
	refs := references{routes: map[string]bool{}, clusters: map[string]bool{}}
	for _, l := range out.Listeners {
		if err := refs.walk(l); err != nil {
			return Resources{}, fmt.Errorf("reading listener %q: %w", l.GetName(), err)
		}
	}
	for _, r := range res.Routes {
		if refs.routes[r.GetName()] {
			out.Routes = append(out.Routes, r)
			if err := refs.walk(r); err != nil {
				return Resources{}, fmt.Errorf("reading route configuration %q: %w", r.GetName(), err)
			}
		}
	}
	assignments := map[string]bool{}
	for _, c := range res.Clusters {
		if refs.clusters[c.GetName()] {
			out.Clusters = append(out.Clusters, c)
			if c.GetEdsClusterConfig() != nil {
				// An EDS cluster without a service name asks for its own name's assignment.
				assignments[cmp.Or(c.GetEdsClusterConfig().GetServiceName(), c.GetName())] = true
			}
		}
	}
	for _, e := range res.Endpoints {
		if assignments[e.GetClusterName()] {
			out.Endpoints = append(out.Endpoints, e)
		}
	}
	return out, nil
}

// references are the route configurations (by RDS) and clusters (by a route's or a tcp_proxy's
// action) that the messages walked name.
type references struct {
	routes, clusters map[string]bool
}

// walk records what m and every message below it name, unpacking each Any (a filter's config).
func (r references) walk(m proto.Message) error {
	switch v := m.(type) {
	case *hcmv3.Rds:
		r.routes[v.GetRouteConfigName()] = true
	case *tcpproxyv3.TcpProxy:
		r.clusters[v.GetCluster()] = true
	case *tcpproxyv3.TcpProxy_WeightedCluster_ClusterWeight:
		r.clusters[v.GetName()] = true
	case *routev3.RouteAction:
		r.clusters[v.GetCluster()] = true
	case *routev3.WeightedCluster_ClusterWeight:
		r.clusters[v.GetName()] = true
	case *anypb.Any:
		inner, err := v.UnmarshalNew()
		if err != nil {
			return fmt.Errorf("cannot unpack the Any of type %q: %w", v.GetTypeUrl(), err)
		}
		return r.walk(inner)
	}
	delete(r.clusters, "") // a specifier of another kind
	var errs []error
	pm := m.ProtoReflect()
	pm.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsMap():
			if fd.MapValue().Kind() == protoreflect.MessageKind {
				v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
					errs = append(errs, r.walk(mv.Message().Interface()))
					return true
				})
			}
		case fd.Kind() != protoreflect.MessageKind && fd.Kind() != protoreflect.GroupKind:
		case fd.IsList():
			for i := range v.List().Len() {
				errs = append(errs, r.walk(v.List().Get(i).Message().Interface()))
			}
		default:
			errs = append(errs, r.walk(v.Message().Interface()))
		}
		return true
	})
	if i := slices.IndexFunc(errs, func(err error) bool { return err != nil }); i >= 0 {
		return errs[i]
	}
	return nil
}
