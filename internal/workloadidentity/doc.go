// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Package workloadidentity is everything the mesh's components agree on about workload
// identities: who issues them, what they are called, and where on a node they are fetched. It is
// the one place that explains them; the manager's registrar writes SPIRE entries from it, the
// node agent fetches SVIDs by it, the pod webhook mounts the Workload API socket by it, the dial
// surface and the data plane read the issuer from it, and config/spire configures SPIRE to match.
//
// # The issuer (issuer.go)
//
// Issuer is the choice the manager and the node agent are told (--identity-issuer, IssuerFlag):
// SPIRE, the default, which issues every service its SPIFFE ID; or NoIssuer, a mesh that runs
// without one. What NoIssuer means is decided by its readers, each from this one value: the dial
// surface (internal/resolve) refuses every raw-TCP spelling and says why (NoIssuerTCP), the
// controller warns each MeshService with a TCP port by an Event, and the node's data plane
// (internal/xds) emits no raw-TCP cluster and closes a captured TCP dial of a mesh VIP. Raw TCP
// rides mTLS between workload identities only; without an identity it is refused loudly, never
// sent in plaintext. HTTP is left as it is: the workload requirements page promises mTLS on every
// hop and documents no plaintext fallback, so without certificates an HTTP hop fails closed in
// the proxy.
//
// # SPIFFE IDs and the node alias (spiffe.go)
//
// A service's identity is the SPIFFE ID of its ServiceAccount, spiffe://<mesh-domain>/ns/<ns>/sa/<sa>
// (ServiceAccountID), which is a MeshService's status.identity. Every registration entry the
// registrar writes has one parent, the node agents' alias (NodeAlias, NodeAliasPath): an alias
// entry selected by the node attestor's selectors, so a workload's SVID is on every node. A
// workload entry's selectors (PodSelectors) are the ones SPIRE's k8s workload attestor reports
// for a pod of that ServiceAccount, and the ones the agent asks the Delegated Identity API with
// for a local pod's SVID.
//
// # Sockets (spiffe.go)
//
// SPIRE's sockets are in hostPath directories shared by the SPIRE agent, the node agent and, for
// the Workload API only, the pods' identity containers: the Workload API socket in
// NodeWorkloadSocketDir (dialled by a pod's identity containers at WorkloadSocketAddr, the same
// path the pod webhook mounts), the admin socket (the Delegated Identity API) in
// NodeAdminSocketDir, which only the node agent mounts. The identity containers read their pod
// from the downward API (EnvNamespace, EnvServiceAccount, EnvNodeName) so that a pod held in Init
// says where to look.
//
// The name is workloadidentity, not identity: "identity" is every SPIFFE ID variable of the code
// base, and a package of that name would be shadowed by them.
//
// It is pure and imports nothing of the project, only go-spiffe's spiffeid (standard library
// only) beside the standard library (depguard rules pure and pure-core): the shared core
// (internal/resolve) and the binaries read it alike.
package workloadidentity
