// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Package cni is what the chained CNI plugin (cmd/cni), its installer (cmd/agent install-cni)
// and the node agent share: the protocol on the agent's unix socket (Request, Response, Client),
// the plugin's configuration (PluginConf), the edit of the node's conflist that chains the
// plugin last (InsertPlugin, RemovePlugin), the installation on a node's CNI directories
// (Installer) and the kubeconfig the plugin reads a pod with when the agent cannot be reached
// (Kubeconfig).
//
// The plugin links this package, so it stays small: no controller-runtime and no cache; the only
// client code is client-go's kubeconfig loader and REST configuration. It must not import
// internal/agent (the agent imports it).
package cni
