// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Package spireregistrar keeps SPIRE's registration entries equal to the mesh's identities,
// through the SPIRE server API (entry/v1 on the server's unix socket). The entries it wants
// (Desired) are:
//
//   - per MeshService whose status.identity is set, one entry per node that runs a mesh pod of
//     that identity's ServiceAccount (bound to it by spec.nodeName, not finished): SPIFFE ID =
//     the identity, parent = that node's SPIRE agent (Config.NodeAgentPath: by default
//     k8s_psat's spiffe://<td>/spire/agent/k8s_psat/<cluster>/<node UID>), selectors k8s:ns:<ns>
//     and k8s:sa:<sa> (workloadidentity.PodSelectors). A node's agent holds only its own pods'
//     identities, so a compromised node can hand out no other through the Delegated Identity
//     API. The entry is written when the pod is bound, before the kubelet starts it, and deleted
//     when the node's last such pod finishes or goes;
//   - the node agent's delegate entry: the SPIFFE ID of the node agent's ServiceAccount under the
//     node agents' alias (workloadidentity.NodeAlias), the ID the SPIRE agents' authorized_delegates
//     lists, on every node;
//   - the alias itself (parent spiffe://<td>/spire/server, the node attestor's selectors), unless
//     the user's SPIRE has its own (Config.NodeSelectors empty).
//
// Ownership: an entry is the registrar's when its entry ID starts with EntryIDPrefix. SPIRE
// v1.13 lets a caller choose the ID of the entry it creates (up to 255 of [A-Za-z0-9._-]), the ID
// never changes, and nothing outside SPIRE's API sees it. The registrar lists every entry and
// only ever updates or deletes those whose ID carries the prefix: every other entry is never
// touched. A desired entry that an entry not ours already provides (same SPIFFE ID, parent and
// selectors) is left to it.
//
// Diff and Desired are pure; Registrar is the controller-runtime reconciler that gathers the
// MeshServices, the mesh's pods and the nodes from the manager's cache and the entries from
// SPIRE, and writes the differences in batches. It is the manager's: it must not import the
// node agent or its data plane (depguard rule controller-not-agent).
package spireregistrar

// The registrar's RBAC (config/rbac/spire_registrar_role.yaml, the role of the registrar-only
// sidecar beside the SPIRE server): it reads MeshServices' status.identity, where the mesh's
// pods run, and the nodes' UIDs, and nothing else.
//   - get: controller-runtime's cached client may read one object;
//   - list: each informer's first listing, from which every reconcile's full diff is gathered;
//   - watch: the informers follow identities, pods' bindings and nodes as they come and go.
//
// Pods: which nodes run a pod of an identity (spec.nodeName, spec.serviceAccountName), the
// mesh's pods only (the aether.io/managed label's selector). Nodes: a node's UID, of which its
// SPIRE agent's ID is made (metadata only). It writes nothing to the API server: its writes go
// to SPIRE.
// +kubebuilder:rbac:groups=mesh.aether.io,resources=meshservices,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
