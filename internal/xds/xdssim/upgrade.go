// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdssim

import (
	"fmt"
	"strings"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
)

// What Envoy 1.40 does with a request's HTTP version and its upgrade, before and around routing:
// the HTTP/1 codec (source/common/http/http1/codec_impl.cc), the HTTP/2 codec
// (source/common/http/http2/codec_impl.cc), the connection manager
// (source/common/http/conn_manager_impl.cc, filter_manager.cc) and
// HttpConnectionManagerConfig::createUpgradeFilterChain.

// h2cUpgrade is the upgrade token of HTTP/2 over cleartext (RFC 7540 section 3.2).
const h2cUpgrade = "h2c"

// decodeRequest is the request as the codec hands it to the connection manager, or Envoy's own
// answer when it goes no further:
//   - HTTP/1.0 (and any version but 1.1) is answered 426 Upgrade Required unless
//     http_protocol_options.accept_http_10 (ServerConnectionImpl::checkProtocolVersion); a
//     missing Host then takes default_host_for_http_10 when set (else the HCM's 400 follows);
//   - an HTTP/1 Upgrade: h2c is dropped, with its Connection tokens and HTTP2-Settings: Envoy
//     does not support it and serves the request as HTTP/1.1 (ConnectionImpl::onHeadersCompleteImpl);
//   - an HTTP/2 extended CONNECT (:protocol) reaches the connection manager only when the codec
//     advertised SETTINGS_ENABLE_CONNECT_PROTOCOL (http2_protocol_options.allow_connect,
//     sendSettingsHelper); else the stream is reset. It arrives as an HTTP/1-style upgrade
//     (ServerStreamImpl::decodeHeaders: transformUpgradeRequestFromH2toH1, method GET).
//
// An HTTP/1.1 or HTTP/2 CONNECT (the method, not an extended CONNECT) is modelled only where
// Envoy refuses it (refuseConnect); a connection manager that allows the CONNECT upgrade is not
// modelled.
func decodeRequest(hcm *hcmv3.HttpConnectionManager, req Request) (Request, Verdict, *Response, error) {
	if isConnect(req) {
		if allowed, err := upgradeAllowed(hcm, nil, connectMethod); err != nil || allowed {
			return req, Unmodelled, nil, fmt.Errorf("%w: a CONNECT request to HCM %q, which allows the CONNECT upgrade", ErrUnsupported, hcm.GetStatPrefix())
		}
	}
	if req.HTTP2 {
		if req.Upgrade != "" && !hcm.GetHttp2ProtocolOptions().GetAllowConnect() {
			return req, Closed, nil, fmt.Errorf("%w (HCM %q, :protocol %q)", ErrExtendedConnect, hcm.GetStatPrefix(), req.Upgrade)
		}
		if req.Upgrade != "" {
			req.Method = "GET"
		}
		return req, "", nil, nil
	}
	if strings.EqualFold(req.Upgrade, h2cUpgrade) {
		req.Upgrade = ""
	}
	if req.HTTP10 {
		options := hcm.GetHttpProtocolOptions()
		if !options.GetAcceptHttp_10() {
			return req, Answered, localReply(426), fmt.Errorf("%w (HCM %q)", ErrHTTP10, hcm.GetStatPrefix())
		}
		if req.Host == "" {
			req.Host = options.GetDefaultHostForHttp_10()
		}
	}
	return req, "", nil, nil
}

// refuseUpgrade answers an upgrade request 403 when neither the route nor the connection
// manager allows its type (ActiveStream::decodeHeaders: the filter chain could not be created
// for the upgrade while a route is cached). ra is the forwarding route's action; nil for a
// route without a route entry (a direct response, a redirect, require_tls), whose upgrades the
// connection manager alone decides. It reports whether the walk ends here.
func refuseUpgrade(out *Outcome, hcm *hcmv3.HttpConnectionManager, ra *routev3.RouteAction, req *Request) bool {
	if req.Upgrade == "" {
		return false
	}
	allowed, err := upgradeAllowed(hcm, ra, req.Upgrade)
	switch {
	case err != nil:
		*out = out.fail(Unmodelled, err)
	case !allowed:
		*out = out.fail(Answered, fmt.Errorf("%w (upgrade %q, HCM %q, route %s)", ErrUpgradeRejected, req.Upgrade, hcm.GetStatPrefix(), out.Route))
		out.Response = localReply(403)
	default:
		return false
	}
	return true
}

// upgradeAllowed is HttpConnectionManagerConfig::createUpgradeFilterChain: the route's
// upgrade_configs entry for the type (compared case-insensitively), when there is one, decides
// (enabled, the default, allows; disabled refuses); else the connection manager's entry, enabled
// unless it says otherwise; with neither, the upgrade is refused. Custom upgrade filter chains and
// a route's connect_config are not modelled.
func upgradeAllowed(hcm *hcmv3.HttpConnectionManager, ra *routev3.RouteAction, upgrade string) (bool, error) {
	for _, u := range ra.GetUpgradeConfigs() {
		if !strings.EqualFold(u.GetUpgradeType(), upgrade) {
			continue
		}
		if u.GetConnectConfig() != nil {
			return false, fmt.Errorf("%w: a route's upgrade %q with connect_config", ErrUnsupported, upgrade)
		}
		return u.GetEnabled() == nil || u.GetEnabled().GetValue(), nil
	}
	for _, u := range hcm.GetUpgradeConfigs() {
		if !strings.EqualFold(u.GetUpgradeType(), upgrade) {
			continue
		}
		if len(u.GetFilters()) > 0 {
			return false, fmt.Errorf("%w: HCM %q gives upgrade %q filters of its own", ErrUnsupported, hcm.GetStatPrefix(), upgrade)
		}
		return u.GetEnabled() == nil || u.GetEnabled().GetValue(), nil
	}
	return false, nil
}

// connectMethod is the method of a tunnel request, and the upgrade type that allows one.
const connectMethod = "CONNECT"

// isConnect says req is a CONNECT (a tunnel to its Host, the authority-form request target), not
// an extended CONNECT (an upgrade).
func isConnect(req Request) bool {
	return strings.EqualFold(req.method(), connectMethod) && req.Upgrade == ""
}

// refuseConnect answers a CONNECT 403 when the connection manager has no CONNECT upgrade
// (decodeRequest left the others unmodelled) and no route of rc has a connect_matcher: only such
// a route matches a CONNECT (a path matcher never does: it has no path), and without a route
// entry the connection manager's upgrade_configs alone decide (FilterManager treats CONNECT as
// an upgrade of type CONNECT; ActiveStream::decodeHeaders answers Forbidden, upgrade_failed).
// It reports whether the walk ends here.
func refuseConnect(out *Outcome, hcm *hcmv3.HttpConnectionManager, rc *routev3.RouteConfiguration, req *Request) bool {
	if !isConnect(*req) || req.Host == "" { // no authority: the connection manager's 400 (checkRequest)
		return false
	}
	for _, vh := range rc.GetVirtualHosts() {
		for _, r := range vh.GetRoutes() {
			if r.GetMatch().GetConnectMatcher() != nil {
				*out = out.fail(Unmodelled, fmt.Errorf("%w: a CONNECT where route %q of virtual host %q has a connect_matcher",
					ErrUnsupported, r.GetName(), vh.GetName()))
				return true
			}
		}
	}
	*out = out.fail(Answered, fmt.Errorf("%w (HCM %q, CONNECT %s)", ErrConnectRejected, hcm.GetStatPrefix(), req.Host))
	out.Response = localReply(403)
	return true
}
