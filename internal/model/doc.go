// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Package model is the mesh as its renderers see it (DESIGN section 8: caches → model → pure
// builders → writers): one Service per MeshService with its identity, VIP, primary port and
// ports, and for every (port, protocol) pair its members — the endpoints declaring that port
// with that protocol, each with address, health, weight, locality, metadata, node and
// appProtocol. It owns the rules that turn a service's MeshEndpoints into that shape, so that no
// renderer keeps a copy of them:
//   - membership: an endpoint is a member of every (port, protocol) pair it declares;
//   - the protocol vote on a port whose endpoints disagree: most ready endpoints, ties to the
//     newer declaration (the pair whose newest member is younger), then the protocol's name;
//   - the primary vote: most endpoints, ties to the newer declaration, then the lower port;
//   - the port cap: at most MaxServicePorts ports, the primary first, then those declared by
//     the most endpoints, ties to the lower port.
//
// Every rule depends only on the set of endpoints, never on their order. Service.Validate states
// the invariants a built Service holds. LocalPod (a pod on the agent's node: netns, identity,
// capture mode) is what the agent's xDS publisher lists of its node's meshed pods.
//
// Imported by internal/meshservice (the MeshService status is rendered from a Service), by the node
// agent's lister (agent.View.Services) and, once it exists, by internal/xds. It is pure: no API client,
// cache, clock or I/O (depguard rule pure; hack/lint-canary.sh proves the rule still matches).
package model
