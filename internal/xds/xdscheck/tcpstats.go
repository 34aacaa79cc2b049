// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdscheck

import (
	"fmt"
	"strings"

	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"

	"github.com/aether-mesh/aether-operator/internal/xds"
)

// TCPStats checks that every raw-TCP port a local pod serves is counted apart: each tcp_proxy of
// an inbound listener (in_<p>, and the floor of a TCP primary) has the stat prefix
// tcp_<ns>/<svc>_<p>, read from what the chain itself says, the service's identity (the
// certificate it presents, spiffe://<domain>/ns/<ns>/sa/<svc>) and the port (its app cluster,
// app|<ns>/<pod>:<p>), with no dot (Envoy splits stat names at dots, and tags a tcp_proxy's
// prefix up to the first: a dot of the service's name is spelled '_').
func TCPStats(res xds.Resources) []string {
	var out []string
	for at, fc := range inboundChains(res) {
		proxy := &tcpproxyv3.TcpProxy{}
		if !lastFilterAs(fc, proxy) {
			continue
		}
		tlsContext := &tlsv3.DownstreamTlsContext{}
		var identity string
		if unpackAs(fc.GetTransportSocket().GetTypedConfig(), tlsContext) {
			if certs := tlsContext.GetCommonTlsContext().GetTlsCertificateSdsSecretConfigs(); len(certs) > 0 {
				identity = certs[0].GetName()
			}
		}
		_, nsAndSA, ok1 := strings.Cut(identity, "/ns/")
		ns, sa, ok2 := strings.Cut(nsAndSA, "/sa/")
		port := proxy.GetCluster()[strings.LastIndexByte(proxy.GetCluster(), ':')+1:]
		if !ok1 || !ok2 || port == "" {
			out = append(out, fmt.Sprintf("%s: its identity %q or its cluster %q does not say which service port it serves", at, identity, proxy.GetCluster()))
			continue
		}
		want := "tcp_" + ns + "/" + strings.ReplaceAll(sa, ".", "_") + "_" + port
		if got := proxy.GetStatPrefix(); got != want {
			out = append(out, fmt.Sprintf("%s: tcp_proxy stat_prefix %q, want %q: the port's bytes and connections are not counted per service port", at, got, want))
		}
	}
	return out
}
