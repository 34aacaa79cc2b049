// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Package xdstest holds the meshes internal/xds is tested on (test support): one function per
// scenario of proposal 037's resolution table and DESIGN section 5 (pure HTTP, pure TCP, mixed
// with an HTTP primary, a TCP primary with an HTTP secondary, no HTTP port, 80 declared,
// 443=tcp, scoped capture, a rollout conflict, weighted routes, and a mesh without an identity
// issuer), All() by golden directory name, EndpointChange (the endpoint-only change of the
// stability gate), Decode (a mesh from fuzz bytes) and Fleet (the benchmarks' large mesh).
//
// A scenario is data: pods declared in the annotation grammar become MeshEndpoints through
// internal/registration (as the node agent writes them and the controller verifies them) and
// services through model.BuildService, so a scenario can only say what a cluster can hold. The
// addresses and VIPs are data only: nothing dials them.
//
// It is pure (depguard rule pure): no client, clock or I/O.
package xdstest
