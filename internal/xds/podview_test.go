// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xds_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/aether-mesh/aether-operator/internal/xds"
	"github.com/aether-mesh/aether-operator/internal/xds/xdstest"
)

// TestPodResourcesAreThePodsOwn: of a node serving two pods of two identities (shop/payments-0,
// web/frontend-0), one pod's resources are, by the names of names.go: its three listeners
// (capture_, proxy_, inbound_<ns>/<pod>), the route configurations of its identity
// (capture|, proxy|<ns>/<sa>), every cluster qualified by its identity (the capture routes send
// to each upstream), its own app clusters, and the load assignments of those clusters; nothing of
// the other pod. A pod the node does not serve gets nothing.
func TestPodResourcesAreThePodsOwn(t *testing.T) {
	res := build(t, xdstest.MixedHTTPPrimary())
	for _, pod := range []struct{ ns, name, source, other string }{
		{"web", "frontend-0", "web/frontend", "shop/payments"},
		{"shop", "payments-0", "shop/payments", "web/frontend"},
	} {
		got, err := xds.PodResources(res, pod.ns, pod.name)
		if err != nil {
			t.Fatal(err)
		}
		key := xds.PodKey(pod.ns, pod.name)
		if names := listenerNames(got); !slices.Equal(names, []string{xds.CaptureListener(key), xds.InboundListener(key), xds.ProxyListener(key)}) {
			t.Errorf("%s: listeners %q, want its capture, inbound and proxy listeners", key, names)
		}
		var routes []string
		for _, r := range got.Routes {
			routes = append(routes, r.GetName())
		}
		if want := []string{"capture|" + pod.source, "proxy|" + pod.source}; !slices.Equal(routes, want) {
			t.Errorf("%s: route configurations %q, want %q", key, routes, want)
		}
		var wantClusters, gotClusters []string
		for _, c := range res.Clusters {
			if strings.HasSuffix(c.GetName(), "|"+pod.source) || strings.HasPrefix(c.GetName(), "app|"+key+":") {
				wantClusters = append(wantClusters, c.GetName())
			}
		}
		for _, c := range got.Clusters {
			if strings.Contains(c.GetName(), pod.other) {
				t.Errorf("%s: cluster %q is the other pod's", key, c.GetName())
			}
			if c.GetName() != xds.PassthroughCluster && c.GetName() != xds.BlackholeCluster {
				gotClusters = append(gotClusters, c.GetName())
			}
		}
		if len(wantClusters) < 3 || !slices.Equal(gotClusters, wantClusters) {
			t.Errorf("%s: clusters %q, want %q", key, gotClusters, wantClusters)
		}
		named := map[string]bool{}
		for _, c := range got.Clusters {
			if eds := c.GetEdsClusterConfig(); eds != nil {
				named[eds.GetServiceName()] = true
			}
		}
		for _, e := range got.Endpoints {
			if !named[e.GetClusterName()] {
				t.Errorf("%s: load assignment %q is named by none of its clusters", key, e.GetClusterName())
			}
			delete(named, e.GetClusterName())
		}
		if len(named) > 0 {
			t.Errorf("%s: its clusters name load assignments it lacks: %v", key, named)
		}
	}

	// Negative control: a pod the node does not serve has no listener, so nothing.
	none, err := xds.PodResources(res, "web", "frontend-1")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(none.Listeners) + len(none.Clusters) + len(none.Routes) + len(none.Endpoints); n != 0 {
		t.Errorf("web/frontend-1, not on the node, got %d resources", n)
	}
}

func listenerNames(res xds.Resources) []string {
	var out []string
	for _, l := range res.Listeners {
		out = append(out, l.GetName())
	}
	return out
}
