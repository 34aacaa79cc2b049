// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Package xds translates a node's model (services, their ports and endpoints) into Envoy xDS
// resources, purely: model in, resources out, no clients, clocks or I/O. The agent serves the
// result with go-control-plane. Build builds afresh; a Builder builds the same bytes, reusing
// what its last build made from inputs that did not change (the agent keeps one).
// BuildProxyless renders the same model for a proxyless gRPC client
// (grpc-go's xds:/// resolver) instead of the node's Envoy.
//
// In a mesh without a workload-identity issuer (model.Mesh.Issuer: the agent's
// --identity-issuer=none) raw TCP, which rides mTLS only, is not built: no raw-TCP cluster or
// load assignment, no TCPRoute or TLSRoute applied, and each TCP capture chain of a mesh VIP
// closes the connection through the blackhole cluster instead of passing it through in plaintext.
// Resources.Skipped names each service so left. HTTP is built as ever.
//
// It must not import internal/controller or any Kubernetes client code: depguard rules
// agent-not-controller and pure.
package xds
