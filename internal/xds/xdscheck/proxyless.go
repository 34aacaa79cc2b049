// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdscheck

import (
	"fmt"
	"strings"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"github.com/envoyproxy/go-control-plane/pkg/wellknown"

	"github.com/aether-mesh/aether-operator/internal/xds"
)

// Proxyless runs the gates that hold for a proxyless rendering (xds.BuildProxyless, and
// xds.BuildProxylessServer's listeners): names,
// references, consistency, validation inside every Any, and GRPC, what grpc-go v1.85 accepts and
// enforces. (Chains, Pinning and Domains are the Envoy rendering's: its clusters carry SDS
// certificates and typed SAN matchers, which grpc-go refuses or ignores.)
func Proxyless(res xds.Resources) []string {
	var out []string
	for _, gate := range []struct {
		name  string
		check func(xds.Resources) []string
	}{
		{"names", Names}, {"references", References}, {"consistency", Consistency}, {"validation", Validation}, {"grpc", GRPC},
	} {
		for _, v := range gate.check(res) {
			out = append(out, gate.name+": "+v)
		}
	}
	return out
}

// GRPC checks a proxyless rendering against the rules grpc-go v1.85 applies on receipt (its
// xdsclient/xdsresource unmarshal_{lds,rds,cds}.go; a violation is a NACK of the whole response,
// or a pin silently not enforced):
//   - a client listener is an API listener whose HCM takes its routes by RDS over ADS, ends with the
//     router filter and leaves xff_num_trusted_hops unset; its filter chains hold the same HCM
//     (for go-control-plane's Consistent(), which does not read api_listener); any other
//     listener is a proxyless server's, checked by grpcServerListener (mTLS, its port's RBAC);
//   - a cluster is EDS (no STATIC) with ROUND_ROBIN; its TLS context takes the client's
//     certificate and the trust bundle from a certificate provider instance (never SDS), and pins
//     the server by an exact SPIFFE ID in match_subject_alt_names (the typed matchers are not
//     read). Only a cluster whose load assignment is empty (the blackhole) may carry no TLS;
//   - a route matches its path by prefix, exact path or regular expression (grpc-go NACKs a
//     path_separated_prefix), and a route to clusters retries UNAVAILABLE alone, twice, 25–250 ms
//     apart (grpcRetries).
func GRPC(res xds.Resources) []string {
	var out []string
	for _, l := range res.Listeners {
		if l.GetApiListener() == nil {
			out = append(out, grpcServerListener(l, res.Access, res.Cleartext)...) // a proxyless server's (xds.BuildProxylessServer)
			continue
		}
		out = append(out, grpcListener(l)...)
	}
	empty := map[string]bool{}
	for _, e := range res.Endpoints {
		empty[e.GetClusterName()] = len(e.GetEndpoints()) == 0
	}
	for _, c := range res.Clusters {
		out = append(out, grpcCluster(c, empty)...)
	}
	for _, rc := range res.Routes {
		for _, vh := range rc.GetVirtualHosts() {
			for i, r := range vh.GetRoutes() {
				if r.GetMatch().GetPathSeparatedPrefix() != "" {
					out = append(out, fmt.Sprintf("%s: virtual host %q: route %d matches path_separated_prefix, which grpc-go NACKs",
						resourceAt("route configuration", rc.GetName()), vh.GetName(), i))
				}
				if a := r.GetRoute(); a != nil {
					out = append(out, grpcRetries(fmt.Sprintf("%s: virtual host %q: route %d", resourceAt("route configuration", rc.GetName()), vh.GetName(), i),
						a.GetRetryPolicy())...)
				}
			}
		}
	}
	return out
}

// grpcRetries checks a proxyless route's retry policy: grpc-go reads the gRPC status codes of
// retry_on only (gRFC A44), so the page's rows reach it as UNAVAILABLE, retried twice 25–250 ms
// apart, and no other status: DEADLINE_EXCEEDED, INTERNAL and the others are statuses an
// application returns after it ran the call.
func grpcRetries(at string, p *routev3.RetryPolicy) []string {
	switch {
	case p == nil:
		return []string{at + ": no retry policy: a call the destination's proxy could not deliver (UNAVAILABLE) is not retried"}
	case p.GetRetryOn() != "unavailable":
		return []string{fmt.Sprintf("%s: retry_on %q, want \"unavailable\" alone", at, p.GetRetryOn())}
	case p.GetNumRetries().GetValue() != wantRetries:
		return []string{fmt.Sprintf("%s: num_retries %d, want %d", at, p.GetNumRetries().GetValue(), wantRetries)}
	case p.GetRetryBackOff().GetBaseInterval().AsDuration() != wantBaseInterval || p.GetRetryBackOff().GetMaxInterval().AsDuration() != wantMaxInterval:
		return []string{fmt.Sprintf("%s: retry back-off %s–%s, want %s–%s", at, p.GetRetryBackOff().GetBaseInterval().AsDuration(),
			p.GetRetryBackOff().GetMaxInterval().AsDuration(), wantBaseInterval, wantMaxInterval)}
	}
	return nil
}

// grpcListener checks one listener.
func grpcListener(l *listenerv3.Listener) []string {
	at := resourceAt("listener", l.GetName())
	hcm := &hcmv3.HttpConnectionManager{}
	if err := l.GetApiListener().GetApiListener().UnmarshalTo(hcm); err != nil {
		return []string{at + ": no api_listener holding an HttpConnectionManager (grpc-go reads a client listener there): " + err.Error()}
	}
	var out []string
	rds := hcm.GetRds()
	switch {
	case rds == nil:
		out = append(out, at+": the HCM takes no routes by RDS")
	case rds.GetConfigSource().GetAds() == nil:
		out = append(out, at+": the HCM's RDS config source is not ADS (grpc-go NACKs)")
	}
	if hcm.GetXffNumTrustedHops() != 0 {
		out = append(out, at+": xff_num_trusted_hops is set (grpc-go NACKs)")
	}
	filters := hcm.GetHttpFilters()
	if len(filters) == 0 || !filters[len(filters)-1].GetTypedConfig().MessageIs(&routerv3.Router{}) {
		out = append(out, at+": the HCM's last HTTP filter is not the router")
	}
	if chained := chainedRDS(l); !chained[rds.GetRouteConfigName()] {
		out = append(out, fmt.Sprintf("%s: no filter chain holds an HCM naming route configuration %q: go-control-plane's Consistent() "+
			"would not see it", at, rds.GetRouteConfigName()))
	}
	return out
}

// chainedRDS are the RDS names the HCMs of l's filter chains take.
func chainedRDS(l *listenerv3.Listener) map[string]bool {
	out := map[string]bool{}
	for _, chain := range l.GetFilterChains() {
		for _, f := range chain.GetFilters() {
			hcm := &hcmv3.HttpConnectionManager{}
			if f.GetName() == wellknown.HTTPConnectionManager && f.GetTypedConfig().UnmarshalTo(hcm) == nil && hcm.GetRds() != nil {
				out[hcm.GetRds().GetRouteConfigName()] = true
			}
		}
	}
	return out
}

// grpcCluster checks one cluster; empty tells which load assignments list no endpoint.
func grpcCluster(c *clusterv3.Cluster, empty map[string]bool) []string {
	at := resourceAt("cluster", c.GetName())
	var out []string
	if c.GetType() != clusterv3.Cluster_EDS {
		out = append(out, fmt.Sprintf("%s: type %v; grpc-go takes EDS, LOGICAL_DNS or aggregate clusters only", at, c.GetType()))
	}
	if c.GetLbPolicy() != clusterv3.Cluster_ROUND_ROBIN {
		out = append(out, fmt.Sprintf("%s: lb_policy %v, want ROUND_ROBIN", at, c.GetLbPolicy()))
	}
	ts := c.GetTransportSocket()
	if ts == nil {
		name := c.GetEdsClusterConfig().GetServiceName()
		if name == "" {
			name = c.GetName()
		}
		if isEmpty, known := empty[name]; !known || !isEmpty {
			out = append(out, at+": carries no TLS context, and its load assignment lists endpoints: RPCs would go out in cleartext")
		}
		return out
	}
	tls := &tlsv3.UpstreamTlsContext{}
	if ts.GetName() != wellknown.TransportSocketTLS || ts.GetTypedConfig().UnmarshalTo(tls) != nil {
		return append(out, fmt.Sprintf("%s: transport socket %q is not an UpstreamTlsContext named %s", at, ts.GetName(), wellknown.TransportSocketTLS))
	}
	return append(out, grpcTLS(at, tls.GetCommonTlsContext())...)
}

// grpcTLS checks a proxyless cluster's CommonTlsContext.
func grpcTLS(at string, cc *tlsv3.CommonTlsContext) []string {
	var out []string
	if len(cc.GetTlsCertificateSdsSecretConfigs()) > 0 || len(cc.GetTlsCertificates()) > 0 {
		out = append(out, at+": names its certificate by SDS or inline; grpc-go NACKs both (certificate provider instances only)")
	}
	if cc.GetTlsCertificateProviderInstance().GetInstanceName() == "" {
		out = append(out, at+": presents no certificate: tls_certificate_provider_instance is unset")
	}
	validation := cc.GetValidationContext()
	if combined := cc.GetCombinedValidationContext(); combined != nil {
		validation = combined.GetDefaultValidationContext()
		if combined.GetValidationContextSdsSecretConfig() != nil {
			out = append(out, at+": takes its trust bundle by SDS; grpc-go does not")
		}
	}
	if validation.GetCaCertificateProviderInstance().GetInstanceName() == "" {
		out = append(out, at+": trusts no anchor: ca_certificate_provider_instance is unset")
	}
	for _, m := range validation.GetMatchSubjectAltNames() { //nolint:staticcheck // the field grpc-go reads
		if strings.HasPrefix(m.GetExact(), "spiffe://") && !m.GetIgnoreCase() {
			return out
		}
	}
	return append(out, at+": is not SAN-pinned as grpc-go reads it: no exact SPIFFE ID in match_subject_alt_names "+
		"(grpc-go v1.85 ignores match_typed_subject_alt_names)")
}
