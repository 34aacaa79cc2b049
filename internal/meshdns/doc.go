// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Package meshdns is the mesh's DNS server (DESIGN section 8): the node agent serves it inside
// each meshed pod's network namespace, on 127.0.0.1:18054 and [::1]:18054, UDP and TCP, where the
// pod's capture rules redirect every DNS query it sends to port 53 (internal/capture). One agent
// process serves every pod of its node: a socket keeps the namespace it was opened in.
//
// A query is answered by the first of:
//
//   - over the pod's rate (a token bucket per pod): REFUSED;
//   - a name <service>.<namespace>.<mesh domain> of a MeshService with a VIP: its VIPs (A for
//     IPv4, AAAA for IPv6; a type it has no address of is an empty NOERROR answer), from the
//     Table the agent's MeshService informer keeps, with TTL MeshTTL;
//   - any other name under the mesh domain: NXDOMAIN at once, never forwarded (a namespace that
//     holds services, and the domain itself, are empty non-terminals: an empty NOERROR answer);
//   - anything else: forwarded unchanged to the resolver the pod addressed (the query's original
//     destination, which the kernel's connection tracking recorded when the capture rule
//     redirected it), over the transport the pod used, from a socket in the pod's namespace
//     marked model.ProxySocketMark so its capture leaves it alone; the answer goes back unchanged
//     (EDNS0, TC bit, TTLs and flags as the resolver set them), and a bounded cache per pod
//     serves repeats while their TTLs last.
//
// It imports no Kubernetes client code: the agent feeds the Table and opens the servers.
package meshdns
