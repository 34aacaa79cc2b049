// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdscheck_test

import (
	"strings"
	"testing"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	fileaccesslogv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/file/v3"
	grpcaccesslogv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/grpc/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	"google.golang.org/protobuf/proto"

	"github.com/aether-mesh/aether-operator/internal/xds"
	"github.com/aether-mesh/aether-operator/internal/xds/xdscheck"
	"github.com/aether-mesh/aether-operator/internal/xds/xdstest"
)

// mixedBuild is a copy of a real build with every kind of chain: mixed-http-primary (payments
// serves HTTP 8080, h2 9090 and TCP 9000; frontend calls it), whose listeners are capture_,
// inbound_ and proxy_ of each pod.
func mixedBuild(t *testing.T) xds.Resources {
	t.Helper()
	res, err := xds.Build(xdstest.All()["mixed-http-primary"])
	if err != nil {
		t.Fatal(err)
	}
	return clone(res)
}

// chainOf is chain name of listener (its default chain too) in res.
func chainOf(t *testing.T, res xds.Resources, listener, name string) *listenerv3.FilterChain {
	t.Helper()
	for _, l := range res.Listeners {
		if l.GetName() != listener {
			continue
		}
		for _, fc := range append(l.GetFilterChains(), l.GetDefaultFilterChain()) {
			if fc.GetName() == name {
				return fc
			}
		}
	}
	t.Fatalf("no chain %q in listener %q", name, listener)
	return nil
}

// editHCM and editTCPProxy let change edit the chain's terminal filter.
func editHCM(t *testing.T, res xds.Resources, listener, name string, change func(*hcmv3.HttpConnectionManager)) {
	repack(t, terminal(chainOf(t, res, listener, name)).GetTypedConfig(), func(m proto.Message) { change(m.(*hcmv3.HttpConnectionManager)) })
}

func editTCPProxy(t *testing.T, res xds.Resources, listener, name string, change func(*tcpproxyv3.TcpProxy)) {
	repack(t, terminal(chainOf(t, res, listener, name)).GetTypedConfig(), func(m proto.Message) { change(m.(*tcpproxyv3.TcpProxy)) })
}

// editHTTPLog lets change edit the HCM's gRPC access log's configuration.
func editHTTPLog(t *testing.T, res xds.Resources, listener, name string, change func(*grpcaccesslogv3.HttpGrpcAccessLogConfig)) {
	editHCM(t, res, listener, name, func(h *hcmv3.HttpConnectionManager) {
		repack(t, h.GetAccessLog()[0].GetTypedConfig(), func(m proto.Message) { change(m.(*grpcaccesslogv3.HttpGrpcAccessLogConfig)) })
	})
}

// TestAccessLogsRejectBrokenCopies: every scenario's build passes; each copy of a real build with
// one chain's access log removed, filtered, aimed elsewhere or incomplete fails with the line
// naming the listener, the chain and what is wrong, and All runs the gate.
func TestAccessLogsRejectBrokenCopies(t *testing.T) {
	for name, m := range xdstest.All() {
		res, err := xds.Build(m)
		if err != nil {
			t.Fatal(err)
		}
		if v := xdscheck.AccessLogs(res); v != nil {
			t.Errorf("scenario %s fails:\n%s", name, strings.Join(v, "\n"))
		}
	}
	const capture, inbound, proxy = "capture_web/frontend-0", "inbound_shop/payments-0", "proxy_web/frontend-0"
	for name, tc := range map[string]struct {
		breakIt func(t *testing.T, res xds.Resources)
		want    string
	}{
		"an inbound HTTP port not logged": {func(t *testing.T, res xds.Resources) {
			editHCM(t, res, inbound, "in_8080", func(h *hcmv3.HttpConnectionManager) { h.AccessLog = nil })
		}, `listener "inbound_shop/payments-0" chain "in_8080" HTTP connection manager: no envoy.access_loggers.http_grpc access log to the agent`},
		"an inbound TCP port's log filtered": {func(t *testing.T, res xds.Resources) {
			editTCPProxy(t, res, inbound, "in_tcp_9000", func(p *tcpproxyv3.TcpProxy) {
				p.GetAccessLog()[0].Filter = &accesslogv3.AccessLogFilter{FilterSpecifier: &accesslogv3.AccessLogFilter_NotHealthCheckFilter{}}
			})
		}, `listener "inbound_shop/payments-0" chain "in_tcp_9000" tcp_proxy: its envoy.access_loggers.tcp_grpc access log has a filter`},
		"the floor's log on API v2": {func(t *testing.T, res xds.Resources) {
			editHTTPLog(t, res, inbound, xds.InboundFloorChain, func(c *grpcaccesslogv3.HttpGrpcAccessLogConfig) {
				c.CommonConfig.TransportApiVersion = corev3.ApiVersion_AUTO
			})
		}, `chain "in_floor" HTTP connection manager: its envoy.access_loggers.http_grpc access log transport_api_version AUTO, want V3`},
		"the capture HCM streaming elsewhere": {func(t *testing.T, res xds.Resources) {
			editHTTPLog(t, res, capture, xds.CaptureHTTPChain, func(c *grpcaccesslogv3.HttpGrpcAccessLogConfig) {
				c.CommonConfig.GetGrpcService().GetEnvoyGrpc().ClusterName = "passthrough"
			})
		}, `chain "cap_http" HTTP connection manager: its envoy.access_loggers.http_grpc access log streams to cluster "passthrough", not the agent's "aether-xds"`},
		"the outcome not logged": {func(t *testing.T, res xds.Resources) {
			editHTTPLog(t, res, capture, "cap_http_payments.shop_8080", func(c *grpcaccesslogv3.HttpGrpcAccessLogConfig) {
				c.AdditionalResponseHeadersToLog = nil
			})
		}, `chain "cap_http_payments.shop_8080" HTTP connection manager: its envoy.access_loggers.http_grpc access log does not log the response header x-aether-outcome`},
		"a capture TCP chain without a log name": {func(t *testing.T, res xds.Resources) {
			editTCPProxy(t, res, capture, "cap_tcp_payments.shop_9000", func(p *tcpproxyv3.TcpProxy) {
				repack(t, p.GetAccessLog()[0].GetTypedConfig(), func(m proto.Message) {
					m.(*grpcaccesslogv3.TcpGrpcAccessLogConfig).CommonConfig.LogName = ""
				})
			})
		}, `chain "cap_tcp_payments.shop_9000" tcp_proxy: its envoy.access_loggers.tcp_grpc access log has no log_name`},
		"the passthrough not logged": {func(t *testing.T, res xds.Resources) {
			editTCPProxy(t, res, capture, xds.CapturePassthroughChain, func(p *tcpproxyv3.TcpProxy) { p.AccessLog = nil })
		}, `listener "capture_web/frontend-0" chain "cap_passthrough" tcp_proxy: no envoy.access_loggers.tcp_grpc access log to the agent`},
		"the proxy port logging to a file only": {func(t *testing.T, res xds.Resources) {
			editHCM(t, res, proxy, "cap_http_18081", func(h *hcmv3.HttpConnectionManager) {
				h.AccessLog = []*accesslogv3.AccessLog{{Name: "envoy.access_loggers.file",
					ConfigType: &accesslogv3.AccessLog_TypedConfig{TypedConfig: pack(t, &fileaccesslogv3.FileAccessLog{Path: "/dev/stdout"})}}}
			})
		}, `listener "proxy_web/frontend-0" chain "cap_http_18081" HTTP connection manager: no envoy.access_loggers.http_grpc access log to the agent`},
		"a TCP logger's config under the HTTP logger's name": {func(t *testing.T, res xds.Resources) {
			editHCM(t, res, inbound, "in_9090", func(h *hcmv3.HttpConnectionManager) {
				h.GetAccessLog()[0].ConfigType = &accesslogv3.AccessLog_TypedConfig{TypedConfig: pack(t, &grpcaccesslogv3.TcpGrpcAccessLogConfig{})}
			})
		}, `chain "in_9090" HTTP connection manager: its envoy.access_loggers.http_grpc access log holds a type.googleapis.com/envoy.extensions.access_loggers.grpc.v3.TcpGrpcAccessLogConfig`},
	} {
		t.Run(name, func(t *testing.T) {
			broken := mixedBuild(t)
			tc.breakIt(t, broken)
			v := xdscheck.AccessLogs(broken)
			t.Log(strings.Join(v, "\n"))
			if !containsLine(v, tc.want) {
				t.Errorf("violations %q, want one saying %q", v, tc.want)
			}
			if all := strings.Join(xdscheck.All(broken), "\n"); !strings.Contains(all, "access logs: ") {
				t.Errorf("All does not run AccessLogs: %q", all)
			}
		})
	}
}
