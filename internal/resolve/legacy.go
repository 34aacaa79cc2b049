// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package resolve

import (
	"github.com/aether-mesh/aether-operator/internal/portspec"
)

// This file is the old, per-host surface that internal/meshservice still calls. It is computed
// from DialSurface, so it follows the current rule, in the shape the MeshService status had
// before Names and DialSurface. REMOVE AT INTEGRATION, when the status carries Names and
// DialSurface (and the API's outcome enum gains HostDecides).

// Hosts is Names.
//
// Legacy: remove at integration; call Names.
func Hosts(name, namespace, meshDomain string) []string { return Names(name, namespace, meshDomain) }

// Surface is the dial surface repeated for each host: http://<host>/, <host>:18081,
// https://<host>/, <host>:18082, <host>:<p> for each declared p, <host>:*. The <host>:18081 row
// is the answer to a request with Host: <host> and no port (the old surface had no Host rows),
// so that no row carries HostDecides, which the API's outcome enum does not have yet.
//
// Legacy: remove at integration; call DialSurface and Names (3×(ports+5) rows here against
// 2×ports+9 there).
func Surface(s portspec.PortSet, hosts ...string) []Dial {
	rows := DialSurface(s)
	byAddress := make(map[string]Dial, len(rows))
	for _, d := range rows {
		byAddress[d.Address] = d
	}
	const name = NamePlaceholder
	portless := byAddress[HostRowPrefix+name]
	portless.Reason = "the Host header decides; with Host: " + name + " (no port): " + portless.Reason
	dials := make([]Dial, 0, len(hosts)*(len(s.Ports)+5))
	for _, host := range hosts {
		add := func(address string, d Dial) {
			d.Address = address
			dials = append(dials, d.For(host))
		}
		add(httpScheme+name+"/", byAddress[httpScheme+name+"/"])
		add(hostPort(name, MeshHTTPPort), portless)
		add(httpsScheme+name+"/", byAddress[httpsScheme+name+"/"])
		add(hostPort(name, MeshTCPPort), byAddress[hostPort(name, MeshTCPPort)])
		for _, p := range s.Ports {
			add(hostPort(name, p.Number), byAddress[hostPort(name, p.Number)])
		}
		add(name+":"+AnyOtherPort, byAddress[name+":"+AnyOtherPort])
	}
	return dials
}
