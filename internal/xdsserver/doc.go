// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Package xdsserver is the node agent's xDS writer (DESIGN section 8: caches → model → pure
// builders → writers): the only code that talks to the ADS stream of the node's Envoy. It serves
// one go-control-plane snapshot per node ID over ADS, state of the world and delta on one gRPC
// server, on a unix socket (where the node's Envoy connects) or a loopback TCP port (make run).
//
// Publish takes what internal/xds built and:
//   - versions each resource type by a hash of its content, so an endpoint-only change bumps the
//     EDS version alone and Envoy gets an EDS push and nothing else;
//   - publishes nothing when no type changed;
//   - refuses, with a logged error and a metric, a snapshot that is not Consistent(): the previous
//     one stays in service.
//
// A NACK is a bug: it is logged with the node, the type, the rejected resources and Envoy's
// reason, and counted; the rejected version is not sent again (go-control-plane would resend it at
// once, and Envoy would reject it again, forever), the next change is.
//
// Subpackage xdstest is a real ADS client for tests, behaving as Envoy does on its stream.
//
// It must not import internal/controller (the manager's): depguard rule agent-not-controller.
package xdsserver
