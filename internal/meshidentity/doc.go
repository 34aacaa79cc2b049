// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Package meshidentity is the mesh's workload-identity issuer, as the manager and the node agent
// are told it (--identity-issuer): SPIRE, the default, which issues every service its SPIFFE ID
// spiffe://<mesh-domain>/ns/<ns>/sa/<sa>; or none, a mesh that runs without an issuer. (Not
// "identity": that name is every SPIFFE ID variable of the code base.)
//
// What none means is decided by its readers, each from this one value: the dial surface
// (internal/resolve) refuses every raw-TCP spelling and says why, the controller warns each
// MeshService with a TCP port by an Event, and the node's data plane (internal/xds) emits no
// raw-TCP cluster and closes a captured TCP dial of a mesh VIP. Raw TCP rides mTLS between
// workload identities only; without an identity it is refused loudly, never sent in plaintext.
// HTTP is left as it is: the workload requirements page promises mTLS on every hop and documents
// no plaintext fallback, so without certificates an HTTP hop fails closed in the proxy.
//
// It is pure and imports nothing of the project (depguard rules pure and pure-core): the shared
// core (internal/resolve) and the binaries read it alike.
package meshidentity
