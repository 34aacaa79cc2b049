// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdstest

import (
	"cmp"
	"errors"
	"slices"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/model"
)

// EndpointChange returns a copy of m in which only endpoints changed, as endpoint churn changes
// them: one member's health flips (Healthy to Unhealthy, anything else to Healthy) and a new
// replica of it (same declaration, a new name and address) joins every pair it is a member of.
// It takes the first member, services and members in order, whose change keeps every port's
// protocol, every pair's vote order and the primary (checked by Service.Validate and a
// comparison of the port sets): a change of protocol is not endpoint-only. On a node that
// carries declared upstreams only (model.UpstreamsDeclared), the local pods' own services come
// first: every node carries them, so the change reaches a load assignment. m is not modified.
func EndpointChange(m model.Mesh) (model.Mesh, error) {
	order := make([]int, 0, len(m.Services))
	for i := range m.Services {
		order = append(order, i)
	}
	if m.Upstreams.OnDemand() {
		own := func(s model.Service) bool {
			return slices.ContainsFunc(m.Pods, func(p model.LocalPod) bool { return p.Namespace == s.Namespace && p.Service == s.Name })
		}
		slices.SortStableFunc(order, func(a, b int) int {
			switch oa, ob := own(m.Services[a]), own(m.Services[b]); {
			case oa == ob:
				return 0
			case oa:
				return -1
			}
			return 1
		})
	}
	for _, i := range order {
		svc := m.Services[i]
		for _, name := range memberNames(svc) {
			changed := addReplica(flipHealth(svc.Clone(), name), name)
			if changed.Validate() != nil || !samePorts(svc, changed) {
				continue
			}
			out := m
			out.Services = slices.Clone(m.Services)
			out.Services[i] = changed
			return out, nil
		}
	}
	return model.Mesh{}, errors.New("xdstest: no member of the mesh can change without changing a port's protocol (or the mesh has no endpoint)")
}

// memberNames are the names of every member of svc, sorted, each once.
func memberNames(svc model.Service) []string {
	var names []string
	for _, p := range svc.Ports {
		for _, pr := range p.Pairs {
			for _, mb := range pr.Members {
				names = append(names, mb.Namespace+"/"+mb.Name)
			}
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// flipHealth flips the health of member key (<ns>/<name>) in every pair, and recounts Ready.
func flipHealth(s model.Service, key string) model.Service {
	var flipped bool
	for i := range s.Ports {
		for j := range s.Ports[i].Pairs {
			for k := range s.Ports[i].Pairs[j].Members {
				mb := &s.Ports[i].Pairs[j].Members[k]
				if mb.Namespace+"/"+mb.Name != key {
					continue
				}
				if mb.Health == meshv1alpha1.HealthHealthy {
					mb.Health = meshv1alpha1.HealthUnhealthy
				} else {
					mb.Health = meshv1alpha1.HealthHealthy
				}
				flipped = mb.Health == meshv1alpha1.HealthHealthy
			}
		}
	}
	if flipped {
		s.Ready++
	} else {
		s.Ready--
	}
	return recount(s)
}

// addReplica adds a healthy copy of member key, named <name>-replica at a new address, to every
// pair key is a member of.
func addReplica(s model.Service, key string) model.Service {
	for i := range s.Ports {
		for j := range s.Ports[i].Pairs {
			pr := &s.Ports[i].Pairs[j]
			k := slices.IndexFunc(pr.Members, func(mb model.Member) bool { return mb.Namespace+"/"+mb.Name == key })
			if k < 0 {
				continue
			}
			replica := pr.Members[k]
			replica.Name += "-replica"
			replica.Address = "10.244.99.99"
			replica.Health = meshv1alpha1.HealthHealthy
			pr.Members = append(pr.Members, replica)
			slices.SortFunc(pr.Members, func(a, b model.Member) int {
				return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
			})
		}
	}
	s.Endpoints++
	s.Ready++
	return recount(s)
}

// recount sets every pair's Ready from its members.
func recount(s model.Service) model.Service {
	for i := range s.Ports {
		for j := range s.Ports[i].Pairs {
			pr := &s.Ports[i].Pairs[j]
			pr.Ready = 0
			for _, mb := range pr.Members {
				if mb.Health == meshv1alpha1.HealthHealthy {
					pr.Ready++
				}
			}
		}
	}
	return s
}

// samePorts reports whether a and b list the same ports with the same protocols and primary.
func samePorts(a, b model.Service) bool {
	return a.PortSet().Primary == b.PortSet().Primary && slices.Equal(a.PortSet().Ports, b.PortSet().Ports)
}
