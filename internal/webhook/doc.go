// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Package webhook holds the manager's admission webhooks: the Pod validator that denies a managed
// pod whose annotations internal/portspec refuses, with the parser's own words as the denial, and
// the Pod injector that gives a managed pod annotated aether.io/proxyless: "grpc" its gRPC xDS
// bootstrap and the mount of the node agent's proxyless socket.
//
// It must not parse annotations itself: internal/portspec is the one parser.
package webhook
