// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Package webhook holds the manager's admission webhooks: the Pod validator that denies a managed
// pod whose annotations internal/portspec refuses, with the parser's own words as the denial, and
// the Pod injector that gives every managed pod the identity gate (the init container
// aether-identity-ready, which holds the pod until SPIRE has issued its SVID), and a managed pod
// annotated aether.io/proxyless: "grpc" its gRPC xDS bootstrap, the mount of the node agent's
// proxyless socket and its certificate files from its SVID (the native sidecar aether-identity).
//
// It must not parse annotations itself: internal/portspec is the one parser.
package webhook
