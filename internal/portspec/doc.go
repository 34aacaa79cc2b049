// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Package portspec is the one parser of the pod annotations a workload uses to join the mesh
// (DESIGN section 3): annotations in, a typed Spec out, or errors that each name the annotation,
// the offending token and the fix.
//
// Every component that reads these annotations — the admission webhook, the node agent — calls
// Parse. There is no second parser. The parser never guesses: an error registers nothing.
//
// The package also owns what belongs to the grammar: which keys Parse reads (IsGrammarKey, for
// the webhook to judge an update only when one of them changed), the label that opts a pod in
// (LabelManaged, IsManaged), and which other keys look like a misspelling of ours (Warnings, for
// admission warnings).
//
// Everything is bounded by input size, because a pod may carry 256 KiB of annotations written
// by a hostile tenant: each annotation's value is capped (MaxLength; KindTooLong, not parsed
// further), an Error quotes at most MaxQuoted bytes of input, an ErrorList reports at most
// MaxErrors errors and MaxErrorText bytes (then a count, KindMoreErrors), Warnings returns at
// most MaxWarnings, and the edit distance behind every "did you mean" is computed only within
// two edits of strings of bounded length. Parse and Warnings are linear in the annotations' size
// (BenchmarkParseHostile, BenchmarkWarnings).
//
// This package is pure: no Kubernetes client code, no I/O, no clock. Of this module it imports only
// api/v1alpha1, whose types it writes (a parsed Port is the API's PortProtocol, what a MeshEndpoint
// carries, without translation) and whose mesh ports it refuses (Reserved); of Kubernetes, nothing
// directly. The depguard rules pure and pure-core in .golangci.yml hold it to that.
package portspec
