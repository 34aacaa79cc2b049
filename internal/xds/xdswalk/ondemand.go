// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdswalk

import (
	"fmt"
	"slices"
	"sync"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"

	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/xds"
	"github.com/aether-mesh/aether-operator/internal/xds/xdssim"
)

// FetchAsTheAgent answers the simulator's on-demand requests as the agent does: the name is read
// back (xds.Demand) against the full model m, and the answer is the cluster of that name, with
// the load assignment it reads, from a build of m with the service demanded by the identity
// (xds.WithDemand). Each answer is remembered, as the agent's record is. A build that fails is
// told to failed and answers nothing.
func FetchAsTheAgent(m model.Mesh, build func(model.Mesh) (xds.Resources, error), failed func(error)) xdssim.Fetcher {
	var mu sync.Mutex
	return func(name string) (*clusterv3.Cluster, []*endpointv3.ClusterLoadAssignment, bool) {
		mu.Lock()
		defer mu.Unlock()
		identity, service, ok := xds.Demand(m, name)
		if !ok {
			return nil, nil, false
		}
		m = xds.WithDemand(m, identity, service)
		res, err := build(m)
		if err != nil {
			failed(fmt.Errorf("the on-demand answer for %q: Build: %w", name, err))
			return nil, nil, false
		}
		i := slices.IndexFunc(res.Clusters, func(c *clusterv3.Cluster) bool { return c.GetName() == name })
		if i < 0 {
			return nil, nil, false
		}
		c := res.Clusters[i]
		assignment := c.GetEdsClusterConfig().GetServiceName()
		var endpoints []*endpointv3.ClusterLoadAssignment
		for _, e := range res.Endpoints {
			if e.GetClusterName() == assignment {
				endpoints = append(endpoints, e)
			}
		}
		return c, endpoints, true
	}
}
