// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Package xdswalk is the dial-surface walk's traffic and its expectations, shared by the two
// readers that send it: every connection a node's local clients make for every row of every mesh
// service's dial surface (Cases), each sent as every shape of the traffic corpus (Corpus,
// ShapeConn: HTTP/1.1, HTTP/1.0, h2c, TLS with and without SNI and ALPN, WebSocket, a late first
// byte, a server-first client), and what each shape should get there (Table, Expected), written
// from the workload requirements page and Envoy's documented behaviour, never from
// internal/resolve's outcomes or the builder. internal/xds's TestDialSurfaceLandsWhereStatusSays
// sends it through the simulator (xdssim); test/envoy sends it through a live Envoy to real
// servers and compares what each client saw (Seen) with the table and with the simulator's
// prediction (Predict).
//
// It is test support and pure: no client, clock or I/O. It imports the model, resolve, the xds
// names and the simulator, never the builder's internals.
package xdswalk
