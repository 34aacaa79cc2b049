// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Package registration is the one mapping between a pod and its MeshEndpoint, both ways:
// Registration derives the MeshEndpoint spec the node agent writes for a pod (its annotations
// through internal/portspec, its identity and address), and Verify checks, the way Kubernetes'
// NodeRestriction checks a kubelet's writes, that a MeshEndpoint is that of a real pod (DESIGN
// section 7): the controller counts only endpoints Verify accepts. Trim keeps of a pod just what
// these two read, for the manager's bounded pod cache.
//
// It is pure: it imports the API types, core/v1 and internal/portspec, and no client code, no
// controller-runtime (depguard rule pure), no clock and no I/O.
package registration
