// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Package nodeaddrs is what the node agent counts as the node's own addresses, which capture
// never redirects (internal/capture's sets node_addrs4 and node_addrs6, Options.Node): the
// addresses its Node reports (FromNode: status.addresses, InternalIP and ExternalIP) and those
// of the node's own interfaces (Read, and a Watcher that keeps them current), read over rtnetlink
// in the agent's network namespace, the node's (it runs with hostNetwork).
//
// Not every interface address is the node's own: an address a proxy of the node holds for a
// service is the service's. kube-proxy's IPVS mode puts every ClusterIP on its dummy interface
// kube-ipvs0, so every mesh VIP would count as the node's, and go uncaptured; Counts says which
// interfaces count.
//
// Not pure: Read and the Watcher talk netlink. It imports no client: the agent hands it the Node
// from its cache.
package nodeaddrs
