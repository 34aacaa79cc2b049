// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Package proxyless is what a proxyless gRPC client (a pod annotated aether.io/proxyless: "grpc")
// and the mesh agree on, in one place: the node ID and metadata the client announces on its xDS
// stream, the bootstrap the pod webhook injects (GRPC_XDS_BOOTSTRAP_CONFIG), the certificate
// provider instance the agent's clusters name, and where the pod finds the agent's socket and
// its certificate files. The pod webhook writes these, the agent's xDS server reads them, and
// internal/xds renders against them. It also reads which pod a process runs in from the process's
// cgroup paths (PodUIDFromCgroup): the agent learns a caller's pod from its connection, never from
// the node ID it announces.
//
// It is pure (no Kubernetes client, no I/O): depguard rule pure.
package proxyless
