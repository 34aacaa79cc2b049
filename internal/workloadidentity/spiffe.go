// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package workloadidentity

import (
	"fmt"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
)

// NodeAliasPath is the path of the SPIFFE ID every node agent of the mesh is an alias of (the
// registrar's node alias entry, selected by the node attestor's selectors): the parent of every
// entry the registrar writes, so a workload's SVID is on every node.
const NodeAliasPath = "/aether/node-agents"

// NodeAlias is the node agents' alias in trust domain td.
func NodeAlias(td spiffeid.TrustDomain) spiffeid.ID {
	return spiffeid.RequireFromPath(td, NodeAliasPath)
}

// ServiceAccountID is the SPIFFE ID of ServiceAccount namespace/name: spiffe://<td>/ns/<ns>/sa/<sa>,
// a MeshService's status.identity for the service of that name.
func ServiceAccountID(td spiffeid.TrustDomain, namespace, name string) (spiffeid.ID, error) {
	id, err := spiffeid.FromSegments(td, "ns", namespace, "sa", name)
	if err != nil {
		return spiffeid.ID{}, fmt.Errorf("ServiceAccount %s/%s has no SPIFFE ID: %w", namespace, name, err)
	}
	return id, nil
}

// Selector is one SPIRE selector, type:value (k8s:ns:default is type k8s, value ns:default).
type Selector struct{ Type, Value string }

func (s Selector) String() string { return s.Type + ":" + s.Value }

// PodSelectors are the selectors of ServiceAccount namespace/name's entry, as SPIRE's k8s
// workload attestor reports them for a pod of that ServiceAccount, and as the agent asks the
// Delegated Identity API for a local pod's SVID.
func PodSelectors(namespace, serviceAccount string) []Selector {
	return []Selector{{"k8s", "ns:" + namespace}, {"k8s", "sa:" + serviceAccount}}
}

// Where SPIRE's sockets are on a node (hostPath directories shared by the SPIRE agent, the node
// agent and, for the Workload API only, the pods' identity containers).
const (
	// NodeWorkloadSocketDir holds the SPIRE agent's Workload API socket.
	NodeWorkloadSocketDir = "/run/spire/agent-sockets"
	// WorkloadSocketName is the Workload API socket's name in NodeWorkloadSocketDir.
	WorkloadSocketName = "spire-agent.sock"
	// NodeAdminSocketDir holds the SPIRE agent's admin socket (the Delegated Identity API): the
	// node agent mounts it, no pod does. SPIRE refuses it in the Workload API's directory.
	NodeAdminSocketDir = "/run/spire/admin-sockets"
	// AdminSocketName is the admin socket's name in NodeAdminSocketDir.
	AdminSocketName = "admin.sock"
)

// WorkloadSocketAddr is the Workload API as a pod's identity containers dial it: the pod webhook
// mounts NodeWorkloadSocketDir at the same path into them (and into no other container).
const WorkloadSocketAddr = "unix://" + NodeWorkloadSocketDir + "/" + WorkloadSocketName

// The environment of a pod's identity containers (aether-identity), from the downward API: their
// messages name the pod's MeshService, its SPIRE selectors and its node, so that a pod held in
// Init says where to look.
const (
	EnvNamespace      = "AETHER_POD_NAMESPACE"
	EnvServiceAccount = "AETHER_SERVICE_ACCOUNT"
	EnvNodeName       = "AETHER_NODE_NAME"
)
