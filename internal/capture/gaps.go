// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package capture

import (
	"cmp"
	"slices"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/resolve"
)

// ScopedGap is a service with TCP ports that a scoped pod cannot reach through the mesh: scoped
// capture takes only 18081 and 18082, and :18082 reaches one TCP port (the default), so
// <name>:<p> for any other TCP port p is not captured there (proposal 037, risk 7).
type ScopedGap struct {
	Namespace, Name string
	// Ports are the service's TCP ports that :18082 does not reach, ascending.
	Ports []int32
	// Callers are the scoped pods that may call it ("namespace/name", sorted): those whose
	// upstreams name it, or that declare none.
	Callers []string
}

// ScopedGaps are the gaps of m's services for the pods given (the node's), sorted by namespace
// and name: a service is listed when it has such ports and at least one scoped pod may call it.
// A mesh without an identity issuer has none: no pod reaches a TCP port there, whatever its
// capture mode (the dial surface and the controller's Event say why), so capturing them would
// change nothing.
func ScopedGaps(m model.Mesh, pods []model.LocalPod) []ScopedGap {
	if !m.Issuer.Issues() {
		return nil
	}
	var scoped []model.LocalPod
	for _, p := range pods {
		if p.Capture == model.CaptureScoped {
			scoped = append(scoped, p)
		}
	}
	if len(scoped) == 0 {
		return nil
	}
	var gaps []ScopedGap
	for _, s := range m.Services {
		ports := uncapturedTCPPorts(s)
		if len(ports) == 0 {
			continue
		}
		gap := ScopedGap{Namespace: s.Namespace, Name: s.Name, Ports: ports}
		for _, p := range scoped {
			if calls(p, s) {
				gap.Callers = append(gap.Callers, p.Namespace+"/"+p.Name)
			}
		}
		if len(gap.Callers) > 0 {
			slices.Sort(gap.Callers)
			gaps = append(gaps, gap)
		}
	}
	slices.SortFunc(gaps, func(a, b ScopedGap) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return gaps
}

// uncapturedTCPPorts are s's TCP ports but the one :18082 reaches.
func uncapturedTCPPorts(s model.Service) []int32 {
	set := s.PortSet()
	def, _ := resolve.DefaultTCPPort(set)
	var out []int32
	for _, p := range set.Ports {
		if p.Protocol == meshv1alpha1.ProtocolTCP && p.Port != def {
			out = append(out, p.Port)
		}
	}
	return out
}

// calls reports whether pod may call s: its upstreams (<name> in its own namespace, or
// <name>.<namespace>, as resolve.DeclaredService reads them) name s, or it declares none.
func calls(pod model.LocalPod, s model.Service) bool {
	if len(pod.Upstreams) == 0 {
		return true
	}
	return slices.ContainsFunc(pod.Upstreams, func(u string) bool {
		name, namespace := resolve.DeclaredService(u, pod.Namespace)
		return name == s.Name && namespace == s.Namespace
	})
}
