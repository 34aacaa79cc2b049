// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Package accesslog is the node agent's access-log server: the node's Envoy streams an entry per
// HTTP request and per TCP connection to it (Envoy's AccessLogService,
// envoy.service.accesslog.v3, on the agent's xDS socket; internal/xds renders the loggers), and
// it counts them, per service port and caller, on the agent's Prometheus registry, and writes one
// line per entry to the agent's log (kubectl logs).
//
// What an entry is about comes from what Envoy reports, never from what a client said: the
// upstream cluster's name, read back by xds.ParseCluster (the service, the port and, on the
// caller's side, the local identity that dialled), and, on the destination's side, the caller's
// verified certificate (its URI SAN). Only what the agent's view knows is a label value (SetMesh:
// the mesh it last built): an entry naming a service, port or pod the view does not hold counts
// under service="unknown", port="unknown", and callers beyond MaxCallers per family count as
// "other", so no stream can make a series per string it sends.
//
// A stream must say first which node it logs for (identifier.node.id, which Envoy sends from its
// bootstrap): a stream naming no node, or another node than the agent's, is refused; so is a
// message over MaxMessageBytes, with more than MaxEntries entries, or that does not decode. Each
// refusal is counted by reason and ends that stream only.
//
// It must not import internal/controller (the manager's): depguard rule agent-not-controller.
package accesslog
