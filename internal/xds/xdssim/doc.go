// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Package xdssim is a filter-chain simulator: an independent reader of the Envoy resources
// internal/xds generates (xds.Resources), written from Envoy's documented and implemented
// semantics, not from the builder's conventions. No Envoy binary can run here, so this is one of
// the three readers that stand in for it (with the generated validators and a real ADS client):
// a connection is walked through the listeners, routes, clusters and load assignments the way
// Envoy 1.40 would walk it, and the Outcome says where it lands or why it does not.
//
// It is test support: pure (no I/O), it imports the go-control-plane protos, internal/xds (the
// Resources type and the names), internal/resolve (Agrees) and internal/capture (the Ruleset
// type, the capture rules as data), never the builder's internals. A
// test of package xds that uses it must be an external test (package xds_test): xdssim imports
// xds.
//
// # A walk
//
// One dial-surface row, from a meshed pod to the service, then on the destination:
//
//	sim := xdssim.New(res)
//	out := sim.Dial(xdssim.Conn{Listener: xds.CaptureListener(pod), DstIP: vip, DstPort: 18081,
//		HTTP: &xdssim.Request{Host: "payments.shop.aether.internal:8080"}})
//	if err := xdssim.Agrees(out, row.For(name).Result, fqdn); err != nil { ... }
//	t := out.Targets[0] // its TLS says what the mesh hop's ClientHello carries
//	in := sim.Arrive(xds.InboundListener(destPod), t.TLS.SNI, t.TLS.ALPN,
//		&xdssim.Request{Host: ..., HTTP2: slices.Equal(t.UpstreamHTTP, []string{"h2"})})
//	// in.Targets[0].Receiving() is the application's port on the destination pod.
//
// # What it models
//
//   - Listener filters: original_dst (use_original_dst or the filter) restores the dialled
//     destination, else a redirected connection's destination is the listener's own address;
//     tls_inspector sets transport "tls", the SNI (lower-cased) and the ALPN of a TLS client;
//     http_inspector sets "h2c" for the HTTP/2 preface, "http/1.1" for an HTTP/1.1 request line
//     and "http/1.0" for any other version (Request.HTTP10); the transport is "raw_buffer"
//     when nothing set it. Nothing is injected: a listener without tls_inspector sees no SNI.
//     The filters run in Envoy's order, the original_dst that use_original_dst adds last;
//     filter_disabled (destination port ranges, and/or/not, any) sees the port as it is at the
//     filter's turn: the listener's own until original_dst has run. One timer,
//     listener_filters_timeout (15 s unset, none at 0), bounds them: a client whose first bytes
//     come later (Conn.FirstBytesAfter, a pooled HTTP client) or never (Conn.ServerFirst) is
//     closed, or continues with nothing detected (continue_on_listener_filters_timeout), or
//     waits; Outcome.FiltersWaited says how long the filters held the connection. A server-first
//     client on an HTTP connection manager's chain waits, unanswered (Stalled).
//   - Filter-chain selection exactly as FilterChainManagerImpl::findFilterChain (Envoy
//     source/common/listener_manager/filter_chain_manager_impl.cc): destination port, destination
//     IP (longest prefix), server name (exact, then the longest "*." wildcard, then none),
//     transport protocol, application protocols (in the client's order), direct source IP, source
//     type, source IP, source port; at every level the exact entry when one exists, else the
//     catch-all, and NO backtracking: when the chosen subtree yields nothing the result is the
//     default chain, never a sibling subtree. Check rejects what Envoy rejects (no chain and no
//     default chain, identical or overlapping matches, partial wildcards, invalid ranges, the
//     unimplemented suffix fields); a dial through a rejected listener is closed (ErrRejected).
//   - Downstream TLS: a TLS connection on a TLS-terminating chain is decrypted; plaintext on one
//     fails the handshake; TLS bytes on a plaintext HCM chain are not HTTP (400).
//   - tcp_proxy: cluster or weighted_clusters.
//   - The HTTP connection manager: codec type, an HTTP/1 absolute-form target's authority and
//     origin-form path, replacing the Host (allow_absolute_url, on by default; Outcome.Authority
//     and Outcome.Path are what was routed), Envoy's 400 for a missing Host or one with a character
//     an authority cannot carry and 404 for a path that is not relative, strip_trailing_host_dot,
//     strip_any_host_port and
//     strip_matching_host_port, RDS (a missing route configuration is an error) or an inline
//     route configuration; virtual hosts as RouteMatcher::findVirtualHost (exact, then suffix
//     wildcards longest first, then prefix wildcards longest first, then "*"; case-insensitive;
//     the Host with its port unless ignore_port_in_host_matching; vhost_header); require_tls ALL;
//     the first route that matches (prefix, path, safe_regex, path_separated_prefix,
//     case_sensitive, headers, query parameters, grpc); route, weighted_clusters,
//     direct_response (status, body, response_headers_to_add of route, virtual host and route
//     configuration with their append actions and most_specific_header_mutations_wins) and
//     redirect (status only); Envoy's own 400, 404 and 503 answers. CheckRoutes rejects what
//     Envoy rejects (duplicate domains, two "*", a direct response body over the limit).
//   - HTTP versions and upgrades (upgrade.go): HTTP/1.0 is answered 426 unless
//     http_protocol_options.accept_http_10, a Host-less one takes default_host_for_http_10 (else
//     400); an HTTP/1.1 Upgrade: h2c is dropped by the codec and the request served as HTTP/1.1;
//     an HTTP/2 extended CONNECT (RFC 8441, Request.Upgrade with HTTP2) is reset unless the HCM's
//     http2_protocol_options.allow_connect, else it is an upgrade like HTTP/1.1's; an upgrade
//     (Request.Upgrade) is allowed by the route's upgrade_configs entry for its type when there is
//     one, else by the HCM's (enabled by default, types compared case-insensitively), else Envoy
//     answers 403 once a route is found (no virtual host or route: 404; a direct response or
//     redirect has no per-route entry and leaves it to the HCM); the router asks the upstream for
//     the same upgrade (Target.Upgrade), as an extended CONNECT when it speaks HTTP/2. The
//     protocol a cluster speaks upstream follows its HttpProtocolOptions: explicit, auto, or the
//     downstream's (use_downstream_protocol_config: h2 for an HTTP/2 client, HTTP/1.1 for
//     HTTP/1.x, HTTP/1.0 included), HTTP/1.1 without options. A CONNECT (the method, its Host
//     the authority-form target) is answered 403 when neither the HCM's upgrade_configs allow
//     CONNECT nor any route of its configuration has a connect_matcher (Envoy refuses the
//     upgrade before a route could answer).
//   - Clusters: STATIC, STRICT_DNS and LOGICAL_DNS (their inline load assignment, names not
//     resolved), EDS (service_name, else the cluster name, looked up among the load assignments;
//     a missing one is an error), ORIGINAL_DST (passthrough to the original destination, nothing
//     more). The upstream TLS context: SNI (auto_sni from the Host), the ALPN the ClientHello
//     carries (the context's, else the HTTP pool's fallback: h2, http/1.1 or both; none for
//     tcp_proxy), the SAN matchers, the SDS secret names.
//   - Where an upstream connection leaves from (netns.go): a listener bound in a network
//     namespace records it in the connection's filter state (envoy.network.network_namespace);
//     set_filter_state (network, on_new_connection; literal text and %FILTER_STATE(key:PLAIN)%)
//     sets objects, shared with the upstream or not; a cluster's upstream_bind_config with a
//     source address and the filter_state_override local address selector creates the socket in
//     the namespace the shared envoy.network.upstream_bind_override.network_namespace names, and
//     SO_MARK marks it (Target.Netns, Target.Mark); the source address is the one of the
//     endpoint's family among source_address and extra_source_addresses
//     (DefaultUpstreamLocalAddressSelector), and an endpoint none serves breaks the target
//     (ErrSourceFamily).
//   - Reachability (capture.go): a pod's capture ruleset (internal/capture's Ruleset, as data)
//     read as the kernel evaluates its nat output chain: rules in order, the first match decides,
//     an inet table's rule without an address match sees both families, a set match holds what
//     the set holds (an empty set matches nothing), an application's socket carries no mark and is
//     not the proxy's user's; a redirect goes to the loopback address of the connection's own
//     family (127.0.0.1 or ::1) at the rule's port. CaptureRedirects checks that every family the
//     ruleset redirects reaches a listener bound in the pod's network namespace (ErrNotListening:
//     the kernel refuses the connection); Capture follows one connection. The listening socket is
//     found as the kernel finds it (ListenerAt): in the connection's namespace, the exact address
//     before the wildcard of its family, a :: with ipv4_compat taking IPv4 too; every address of a
//     listener counts, its address and each of additional_addresses, each in the namespace it
//     names, and a listener Envoy rejects binds nothing. Check rejects what ListenerImpl rejects
//     of the addresses (ipv4_compat on an address other than ::, an additional address of another
//     socket type); a redirected connection's local address is the listener's socket of its
//     family; the use_original_dst hand-off finds a listener by any of its addresses.
//   - Load balancing as LoadBalancerBase (load_balancer_impl.cc): EDS health (HEALTHY and
//     UNKNOWN healthy; DEGRADED degraded; UNHEALTHY and TIMEOUT unhealthy; DRAINING unhealthy
//     and excluded, Envoy's default since exclude_host_in_eds_status_draining), priority load
//     with the overprovisioning factor and weighted_priority_health, per-priority panic at
//     healthy_panic_threshold (all hosts of the level, draining ones included), total panic,
//     fail_traffic_on_panic, and locality_weighted_lb_config (a locality of weight 0 receives
//     nothing). Endpoint.Receives says which endpoints get traffic; not how much.
//   - Retries (retry.go), one attempt at a time: Outcome.Retried is the caller's router's
//     decision on an attempt (RetryStateImpl: retriable_request_headers, x-envoy-ratelimited,
//     the retry_on conditions, retriable status codes and headers, a reset by its reason;
//     num_retries and the previous_hosts predicate reported); Outcome.Respond is what the
//     destination's connection manager sends back for what the application did: the route
//     configuration's response headers (the formatter %RESP(:STATUS)% only) on the application's
//     response and on a local reply, then the first local_reply_config mapper whose filter
//     matches (response flags, and/or, not_health_check, Envoy's CEL filter evaluated by cel-go
//     over response.code, code_details and flags). Outcome.Sends is the request headers that go
//     upstream (request_headers_to_remove; x-forwarded-client-cert by
//     forward_client_cert_details, its URI field only), Outcome.Delivers the response headers
//     the client receives.
//
// # What it does not model
//
// The delivery of the resources: the simulator reads one set of them, as if Envoy held them all,
// warm (a cluster that waits for a load assignment its stream never sends again, for one, is
// test/envoy's live walk's to see). Listener hand-off to another listener bound to the original
// destination (reported as ErrHandoff), the filter_chain_matcher API, an allowed CONNECT method (not extended CONNECT:
// Envoy's CONNECT upgrade, connect_matcher, a route's connect_config), an HCM's own upgrade filter
// chains, the HTTP/2 upstream's own allow_connect (RFC 8441 makes the receiver's SETTINGS
// decide, which Arrive models), the upgraded stream after its headers (the 101 or 200, the
// bytes), HTTP/1.0 keep-alive, any network or HTTP filter other than set_filter_state,
// tcp_proxy, the HTTP connection manager and the router (reported as ErrUnsupported, never silently
// passed), the deprecated header-matcher forms (exact_match and kin: use string_match), path
// normalization and merge_slashes, header formatters other than %RESP(:STATUS)% in Respond
// (elsewhere %...% stays literal), the content-type and body of Envoy's own answers,
// local_reply_config's bodies and formats, the redirect's Location, runtime keys and fractions,
// retry budgets, per-try timeouts and the back-off's timing, which failure Envoy meets (the
// caller says: Attempt, Upstream), outlier detection, active health checks, zone-aware
// routing, subsets, drop_overloads, DNS resolution, and ORIGINAL_DST beyond "the original
// destination". Nor first bytes that arrive in pieces: when the listener filters' timer fires,
// a client's whole first flight (ClientHello, request line and headers) is there or none of it
// is. Of capture: chains other than nat output (a prerouting redirect goes to the
// incoming interface's address), conntrack (a connection's first packet decides; a later change
// of the rules does not move it), routing (an IPv6 dial from a namespace without an IPv6 route fails
// before the rules), whether a namespace can bind an address at all (a netns without IPv6 has
// no ::1: Envoy would refuse the listener), two listeners on one address (Envoy's duplicate
// check), and rules matching the proxy's mark or user (the walked connections are an
// application's). An unmodelled feature in the path of a connection gives ErrUnsupported.
package xdssim
