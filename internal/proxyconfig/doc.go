// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Package proxyconfig is the node agent's debug endpoint (--debug-bind-address) and its wire
// form: for one pod, the part of its node's published xDS snapshot that pod's proxy uses
// (xds.PodResources: its listeners, their route configurations, the clusters they send to and
// those clusters' load assignments), as protojson. The agent serves it; kubectl aether
// proxy-config reads it through a port-forward the API server authenticates and authorizes, so
// the endpoint itself listens on loopback only (ParseAddress refuses anything else) and serves no
// secret: the snapshot's SDS secrets (the pods' private keys) are never read.
//
// It must not import internal/agent or any client: the plugin links it.
package proxyconfig
