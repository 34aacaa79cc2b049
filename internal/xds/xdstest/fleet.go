// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdstest

import (
	"fmt"
	"strings"

	"github.com/aether-mesh/aether-operator/internal/model"
)

// Fleet is the benchmarks' mesh (issue 12's acceptance): services services in namespace fleet,
// each with endpoints pods serving HTTP 8080 (primary), h2 9090 and TCP 9000, spread over the
// two other nodes, but for two pods (of the first two services) on this node: the node's local
// pods, the sources every upstream cluster is built for.
func Fleet(services, endpoints int) Scenario {
	var s Scenario
	n := 0
	for i := range services {
		decl := ServiceDecl{Namespace: "fleet", Name: fmt.Sprintf("svc-%04d", i), VIP: fmt.Sprintf("10.96.%d.%d", i/250, i%250+1)}
		s.Services = append(s.Services, decl)
		for j := range endpoints {
			node := []string{SameRegion, OtherRegion}[n%2]
			if j == 0 && i < 2 {
				node = ThisNode
			}
			s.Workloads = append(s.Workloads, Workload{Namespace: decl.Namespace, Service: decl.Name,
				Name: fmt.Sprintf("%s-%02d", decl.Name, j), Node: node, Address: fmt.Sprintf("10.%d.%d.%d", 128+n/62500, n/250%250, n%250+1),
				Port: "8080", Ports: "8080,9090=h2,9000=tcp", Health: healthy, Created: at(9)})
			n++
		}
	}
	return s
}

// DeclaringFleet is Fleet with identities local pods, one each of the first identities services
// (so as many local identities), each declaring declared upstreams in
// config.aether.io/upstreams (the services after its own, by bare name: the same namespace),
// on a node that carries upstreams as mode says. The distribution benchmark's mesh.
func DeclaringFleet(services, endpoints, identities, declared int, mode model.UpstreamsMode) Scenario {
	s := Fleet(services, endpoints)
	s.Upstreams = mode
	for i := range s.Workloads {
		w := &s.Workloads[i]
		var svc int
		if _, err := fmt.Sscanf(w.Service, "svc-%04d", &svc); err != nil {
			panic(fmt.Sprintf("xdstest: fleet service %q: %v", w.Service, err))
		}
		w.Node = []string{SameRegion, OtherRegion}[i%2]
		if svc >= identities || w.Name != w.Service+"-00" {
			continue
		}
		w.Node = ThisNode
		var names []string
		for k := 1; k <= declared; k++ {
			names = append(names, fmt.Sprintf("svc-%04d", (svc+k)%services))
		}
		w.Upstreams = strings.Join(names, ",")
	}
	return s
}
