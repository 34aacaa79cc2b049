// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Package proxyconfig is the node agent's proxy-config endpoint (--proxy-config) and its wire
// form: for one pod, the part of its node's published xDS snapshot that pod's proxy uses
// (xds.PodResources: its listeners, their route configurations, the clusters they send to and
// those clusters' load assignments), as protojson. The agent serves it at
// /proxy-config/<namespace>/<pod> on its metrics endpoint, under that endpoint's authentication
// (internal/apiauth: a bearer token or a client certificate, each vouched for by the API server,
// and get on the path, allowed by the API server); kubectl aether proxy-config reaches it
// through a port-forward to the agent's pod (create on pods/portforward), with the user's own
// credentials. It serves no secret: the snapshot's SDS secrets (the pods' private keys) are
// never read.
//
// It must not import internal/agent or any client: the plugin links it.
package proxyconfig
