// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Package spireregistrar keeps SPIRE's registration entries equal to the mesh's identities,
// through the SPIRE server API (entry/v1 on the server's unix socket). The entries it wants
// (Desired) are:
//
//   - one per MeshService whose status.identity is set: SPIFFE ID = that identity, parent = the
//     node agents' alias (identity.NodeAlias), selectors k8s:ns:<ns> and k8s:sa:<sa>
//     (identity.PodSelectors), so every node's SPIRE agent holds it;
//   - the node agent's delegate entry: the SPIFFE ID of the node agent's ServiceAccount under the
//     alias, the ID the SPIRE agents' authorized_delegates lists;
//   - the alias itself (parent spiffe://<td>/spire/server, the node attestor's selectors), unless
//     the user's SPIRE has its own (Config.NodeSelectors empty).
//
// Ownership: an entry is the registrar's when its entry ID starts with EntryIDPrefix. SPIRE
// v1.13 lets a caller choose the ID of the entry it creates (up to 255 of [A-Za-z0-9._-]), the ID
// never changes, and nothing outside SPIRE's API sees it. The registrar lists the entries under
// the alias and the alias's own, and only ever updates or deletes those whose ID carries the
// prefix: every other entry, under the alias or not, is never touched. A desired entry that an
// entry not ours already provides (same SPIFFE ID, parent and selectors) is left to it.
//
// Diff and Desired are pure; Registrar is the controller-runtime reconciler that gathers the
// MeshServices from the manager's cache and the entries from SPIRE, and writes the differences
// in batches. It is the manager's: it must not import the node agent or its data plane (depguard
// rule controller-not-agent).
package spireregistrar

// The registrar's RBAC (config/rbac/spire_registrar_role.yaml, the role of the registrar-only
// sidecar beside the SPIRE server): it reads MeshServices' status.identity and nothing else.
//   - get: controller-runtime's cached client may read one MeshService;
//   - list: the informer's first listing and the full diff's gathering of every identity;
//   - watch: the informer follows identities as they come, change and go.
//
// It writes nothing to the API server: its writes go to SPIRE.
// +kubebuilder:rbac:groups=mesh.aether.io,resources=meshservices,verbs=get;list;watch
