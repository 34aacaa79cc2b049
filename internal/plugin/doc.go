// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Package plugin is the logic of the kubectl plugin `kubectl aether` (cmd/kubectl-aether holds
// only its cobra wiring):
//
//   - Check: offline, every pod template in manifests judged as the pod admission webhook judges
//     it (portspec.IsManaged, portspec.Parse's ErrorList, portspec.Warnings), word for word.
//   - Dial: what a client spelling reaches on a MeshService, answered by internal/resolve (never a
//     second rule), with the endpoints and the routes behind that port.
//   - Status: every MeshService's ports and the routes parented to it.
//   - ProxyConfig: a pod's part of its node's published proxy configuration, read from the node
//     agent's endpoint (internal/proxyconfig, on the agent's metrics port) through a port-forward
//     the API server authorizes, with the user's own credentials, which the agent has the API
//     server check (PortForwardGet); never recomputed here.
//
// The annotation grammar is internal/portspec's and the resolution rule internal/resolve's; this
// package only finds the inputs and prints the answers.
package plugin
