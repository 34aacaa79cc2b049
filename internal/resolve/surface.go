// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package resolve

import (
	"strconv"

	"github.com/aether-mesh/aether-operator/internal/portspec"
)

// Dial is one row of a dial surface: an address spelling and what it reaches.
type Dial struct {
	Address string `json:"address"`
	Result  `json:",inline"`
}

// Hosts are the names that reach service name in namespace: the mesh name first, then the
// Kubernetes names of the generated Service. All of them resolve the same way.
func Hosts(name, namespace, meshDomain string) []string {
	return []string{
		name + "." + namespace + "." + meshDomain,
		name + "." + namespace + ".svc.cluster.local",
		name + "." + namespace,
	}
}

// OtherPorts is the address suffix of the row that stands for every port nobody declared.
const OtherPorts = ":*"

// Surface is the dial surface of the service whose ports are s, for each host in order: for
// each, http://<host>/, <host>:18081, https://<host>/, <host>:18082, <host>:<p> for every
// declared port in order, and <host>:* for everything else.
func Surface(s portspec.PortSet, hosts ...string) []Dial {
	dials := make([]Dial, 0, len(hosts)*(len(s.Ports)+5))
	for _, host := range hosts {
		add := func(address string, sp Spelling) {
			dials = append(dials, Dial{Address: address, Result: Reach(s, host, sp)})
		}
		add("http://"+host+"/", Spelling{Scheme: SchemeHTTP})
		add(hostPort(host, MeshHTTPPort), Spelling{Port: MeshHTTPPort})
		add("https://"+host+"/", Spelling{Scheme: SchemeHTTPS})
		add(hostPort(host, MeshTCPPort), Spelling{Port: MeshTCPPort})
		for _, p := range s.Ports {
			add(hostPort(host, p.Number), Spelling{Port: p.Number})
		}
		dials = append(dials, Dial{Address: host + OtherPorts, Result: Result{Outcome: Refused,
			Reason: "nothing claims a port the service does not declare: the connection is refused"}})
	}
	return dials
}

func hostPort(host string, port int32) string { return host + ":" + strconv.Itoa(int(port)) }
