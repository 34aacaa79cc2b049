// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Package routes evaluates, purely, Gateway API routes (HTTPRoute, GRPCRoute, TCPRoute,
// TLSRoute, UDPRoute) parented to mesh Services: route + MeshServices + Services +
// ReferenceGrants in, the route's status.parents entries of this controller out. One evaluation
// for all five kinds (Carries says which ports each reaches: a UDPRoute UDP ports only, no other
// kind a UDP port);
// the reconcilers in internal/controller only gather inputs and write the result.
//
// It imports no API client and no controller-runtime (depguard rule pure). A port's protocol,
// its HTTP class and its spellings come from api/v1alpha1 and internal/portspec, not from here.
package routes
