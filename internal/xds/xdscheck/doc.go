// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Package xdscheck holds the structural gates over a node's Envoy configuration (an
// xds.Resources), test support for internal/xds and the agent (issue 12, deliver 4). Each gate is
// one function that returns every violation it finds, one line each, naming the resource, the
// place inside it (chain, filter, virtual host) and the name at fault; nil means it passed:
//   - References: every cluster a tcp_proxy or a route names (single or weighted) is a cluster;
//     every EDS cluster's load assignment and every RDS name exists; every SDS secret has a name
//     and is asked over ADS, where the agent serves it (an SDS name SPIRE has not issued yet is
//     fine: Envoy waits for it);
//   - Chains: no two filter chains of a listener can match the same connection, no two share a name;
//   - Pinning: every upstream TLS cluster pins an exact URI SAN, trusts an anchor and presents
//     an SDS certificate;
//   - Consistency: go-control-plane's snapshot.Consistent();
//   - Validation: ValidateAll() on every resource and on every message packed in an Any inside
//     it, recursively (the generated validators stop at an Any);
//   - Domains: no virtual host domain spells the TCP mesh port 18082;
//   - FromThePod: every capture chain names its listener's network namespace (the pod's) as its
//     upstream's, and every cluster it reaches binds there, with the proxy's mark;
//   - Families: every address of a listener is bound in its namespace, and a listener that
//     restores redirected destinations has a socket of each family its chains match (a redirect
//     keeps the family);
//   - Names: each list sorted by name, each name once (a duplicate hides in a snapshot's map);
//   - InboundLimits: every inbound listener bounds a connection's buffers, its wait for the
//     ClientHello and its TLS handshake, and counts against the node-wide connection cap;
//   - Upgrades: every HTTP connection manager allows the websocket upgrade and extended CONNECT
//     over HTTP/2 (allow_connect), no route disables websocket, every HTTP/2 upstream allows
//     extended CONNECT, and every chain that takes http_inspector's http/1.0 accepts it;
//   - ProxyPort: every outbound listener serves the proxy port 18081 with an HCM that allows
//     absolute-form requests (HTTP_PROXY clients), refuses CONNECT, and whose routes answer a
//     host that is no mesh service 404, never passing it through;
//   - ReusePort: every listener bound to a socket sets enable_reuse_port, so a new node proxy
//     binds beside the old one while the old one drains;
//   - AccessLogs: every HTTP connection manager and tcp_proxy of the node's Envoy logs every
//     request and connection, unfiltered, to the node agent (Envoy's gRPC access logger over the
//     bootstrap's xDS cluster), the HTTP ones with the response header x-aether-outcome;
//   - HTTP2Limits: every HTTP connection manager and HTTP/2 upstream bounds its streams and
//     windows;
//   - BootstrapLimits (over the bootstrap, not the resources): the overload manager caps the
//     node's downstream connections and sheds load on its heap;
//   - ListenersAndRoutesEqual: the stability gate (an endpoint-only change leaves every
//     listener and route byte-identical).
//
// Every gate reads inside each Any (anypb.UnmarshalNew): an Any whose type is not linked into
// the binary is itself a violation, so a gate never passes by not looking.
//
// It is pure (depguard rule pure): resources in, strings out; no clients, clocks or I/O. It
// imports internal/xds for the Resources type only, so internal/xds's own tests use it from the
// external test package xds_test.
package xdscheck
