// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Package meshservice translates, purely, one service's MeshEndpoints (and what the cluster
// already holds for it) into the MeshService status and the generated Service the controller
// writes. No client, clock or I/O: the reconciler in internal/controller gathers Input and
// writes Output. The membership, the protocol and primary votes and the port cap are internal/model's
// (model.BuildService); this package renders the status from that model. Every default port and the
// dial surface come from internal/resolve. A user's Service of the service's name is never part
// of the output: when it selects exactly the service's pods (Adoptable, adopt.go) its cluster IP is
// the VIP and nothing is generated; otherwise it is a NameConflict.
//
// It imports no API client and no controller-runtime (depguard rule pure); the generated Service
// is built as a client-go apply configuration, which is data.
package meshservice
