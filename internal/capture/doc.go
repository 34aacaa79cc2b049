// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Package capture is what a meshed pod's network namespace redirects to its proxy (DESIGN section
// 8): Build renders, from the node's model and one local pod, the pod's table inet aether as data
// (a Ruleset of sets, one nat output chain and its rules), and Ruleset.String writes it in nft's
// own syntax, for golden files and for `nft -f`. The modes (model.CaptureMode):
//
//   - scoped: outbound TCP to the mesh ports 18081 and 18082 (set mesh_ports);
//   - surface, the default: outbound TCP whose (destination address, port) is a pair of some
//     service's dial surface (sets surface4 and surface6: each VIP with resolve.DialPorts);
//   - all: all outbound TCP;
//
// each redirected to the proxy's capture port 18001 on the loopback address of the connection's
// family, 127.0.0.1 or [::1] (a redirect keeps the family; the proxy reads SO_ORIGINAL_DST),
// and in every mode none of: loopback and link-local destinations, the node's own addresses (sets
// node_addrs4 and node_addrs6, which never hold a mesh VIP: see Options.Node), the agent's
// --capture-never CIDRs, the proxy's own user's sockets (an option, off by default: see
// Options.ProxyUID), the proxy's own ports and the pod's aether.io/exclude-outbound-ports (set
// excluded_ports). A mode's rules never depend on the mesh or on the node's addresses: a
// service that comes or goes, or a node address, changes set elements only.
//
// A pod with mesh DNS (model.LocalPod.MeshDNS), in every mode, also has its DNS queries, UDP and
// TCP to port 53 of any address, redirected to the mesh DNS on port 18054 (internal/meshdns):
// right after the return of the node's own marked sockets, before every other return (a pod's
// resolver may be a loopback or link-local address).
//
// ScopedGaps names the services whose TCP ports a scoped pod on the node cannot reach.
//
// The applier that programs a Ruleset over netlink is internal/capture/apply; this package is
// pure: no client, clock, netlink or I/O (depguard rules pure and capture-pure). It imports
// internal/model and internal/resolve (the one rule of which ports a dial surface dials).
package capture
