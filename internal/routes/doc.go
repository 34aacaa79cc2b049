// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Package routes evaluates, purely, Gateway API routes (HTTPRoute, GRPCRoute, TCPRoute,
// TLSRoute) parented to mesh Services: route + MeshServices + Services + ReferenceGrants in,
// the route's status.parents entries of this controller out. One evaluation for all four kinds;
// the reconcilers in internal/controller only gather inputs and write the result.
package routes
