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
// PublishSecrets merges the node's SDS secrets (its pods' SVIDs and the trust bundle, from
// internal/agent/svid) into the same snapshot without rebuilding the rest, versioned by their own
// content hash; the snapshot serves those its clusters and listeners reference (ADS-mode state of
// the world answers only a request naming every served secret), and a referenced secret not
// issued yet is absent: Envoy waits for it (secrets.go). No line logs a secret's content.
//
// A NACK is a bug: it is logged with the node, the type, the rejected resources and Envoy's
// reason, and counted; the rejected version is not sent again (go-control-plane would resend it at
// once, and Envoy would reject it again, forever), the next change is.
//
// The node's socket serves the node's Envoy only: each connection's caller is learned from the
// kernel (peer.go), and a stream of a caller that is not a process of the node Envoy's pods
// (NodeEnvoy) is refused with PermissionDenied, whatever its method (nodeenvoy.go).
//
// Proxyless gRPC clients (pods annotated aether.io/proxyless: "grpc") are served on a second
// socket, the one pods mount, from a snapshot cache of their own (not in ADS mode: grpc-go asks for
// the few resources it dials). A client announcing itself proxyless with a pod's node ID is
// registered while its stream is open, the agent is told (OnProxylessChange) and publishes that
// pod's rendering (PublishProxyless); its snapshot goes when its last stream closes. Any other
// stream on that socket is refused, so no pod can pass for the node's Envoy.
//
// Subpackage xdstest is a real ADS client for tests, behaving as Envoy does on its stream.
//
// It must not import internal/controller (the manager's): depguard rule agent-not-controller.
package xdsserver
