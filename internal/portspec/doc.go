// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Package portspec is the one parser of the pod annotations a workload uses to join the mesh
// (DESIGN section 3): annotations in, a typed Spec out, or errors that each name the annotation,
// the offending token and the fix.
//
// Every component that reads these annotations — the admission webhook, the node agent — calls
// Parse. There is no second parser. The parser never guesses: an error registers nothing.
//
// This package is pure: no Kubernetes client code, no I/O, no clock. It must not import api/ or
// any other package of this module.
package portspec
