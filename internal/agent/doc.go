// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Package agent is the node agent's control loop: it registers the node's managed pods as
// MeshEndpoints (the only writer of them), probes their health, marks them Draining when
// deletion starts, and refuses, loudly, a pod whose annotations do not parse. Those loops filter by
// their node explicitly, whatever a client's view holds. Its View (off unless Options.View is set)
// is a second, cluster-wide cache of MeshServices, MeshEndpoints and Gateway API routes for the
// xDS builder (View.Services, View.Routes); with Options.XDS, a publisher lists the node's mesh
// from both caches (model.Mesh), builds it (internal/xds) after each burst of changes (debounced:
// 100 ms quiet, 1 s at most) and publishes it on the node's ADS server (internal/xdsserver), node
// ID = the node's name. With XDSOptions.Capture, the same rebuild then programs table inet aether
// in the network namespace of each meshed pod the CNI plugin handed over (internal/capture builds
// it, internal/capture/apply writes it over netlink), and a resync loop checks every programmed
// namespace (capture.go). With Options.CNI it answers the node's CNI plugin (cmd/cni, protocol internal/cni) on a unix socket: it decides
// whether a pod is in the mesh from its node's pod cache (the API server for a pod the cache has
// not seen yet), records the pod's network namespace in its NetNS registry (kept in a state file,
// so a restart keeps it) and, with a CaptureProgrammer, programs the pod's capture before the
// plugin's ADD returns; DEL forgets the sandbox. With Options.CNIInstall it keeps the plugin
// installed on the node while it runs (Uninstalling tells, when it stops, whether to remove it).
// Each proxyless gRPC client connected to the server's proxyless socket (a
// meshed pod of the node annotated aether.io/proxyless: "grpc", node ID <namespace>/<pod>) gets
// the mesh rendered for its pod's identity (xds.BuildProxyless) on the same rebuilds.
// With XDSOptions.Identities (internal/agent/svid, on the SPIRE agent's Delegated Identity API),
// each rebuild tells the identity source which identities the node's pods hold, and the SVIDs and
// trust bundle it holds are served to the node's Envoy by SDS on the same snapshot (sds.go),
// published whenever they change: a rotation is an SDS push alone.
//
// It must not import internal/controller (the manager's): depguard rule agent-not-controller. Its
// tests may, and do: the envtest suite runs the MeshService controller to show the health the
// agent writes feeding the service's readiness, and the route controllers, whose status the
// view's Routes reads.
package agent

// The agent's RBAC (config/rbac/agent). It may write MeshEndpoints of any namespace, as RBAC
// cannot say "of my node only"; config/admission's ValidatingAdmissionPolicy narrows every write
// to the agent's own node. The agent creates and replaces MeshEndpoints whole (no patch of their
// spec), patches their status, and only creates Events: it tells a refusal it already reported
// by the Event's deterministic name, so it needs neither list nor patch on Events. It reads its
// own DaemonSet when it stops (cniinstall.go). It reads (list and watch, for its cache, whose
// field selector holds its own Node alone: RBAC's resourceNames cannot name each node of a
// DaemonSet in one role) its Node: its locality labels, for registration and xDS, and its
// status.addresses, the node's addresses capture never redirects (capture.go).
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups=mesh.aether.io,resources=meshendpoints,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups=mesh.aether.io,resources=meshendpoints/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=mesh.aether.io,resources=meshservices,verbs=get;list;watch
// It reads (list and watch, for its cache) the AccessPolicies of every namespace: they decide what
// the inbound chains of its node's pods admit (xds.go, model.PodAccess); it never writes them.
// +kubebuilder:rbac:groups=config.aether.io,resources=accesspolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create
