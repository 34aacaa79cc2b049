// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdscheck

import (
	"fmt"
	"slices"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	grpcaccesslogv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/grpc/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"

	"github.com/aether-mesh/aether-operator/internal/xds"
)

// Envoy's gRPC access loggers (extensions/access_loggers/grpc/v3), by the names its
// documentation gives them.
const (
	httpGRPCLogger = "envoy.access_loggers.http_grpc"
	tcpGRPCLogger  = "envoy.access_loggers.tcp_grpc"
)

// AccessLogs checks that every request and every connection the node's Envoy carries is logged
// to the node agent: every HTTP connection manager and every tcp_proxy of every listener (every
// chain, the default too) has, among its access logs, Envoy's gRPC access logger of its kind
// (http_grpc, tcp_grpc) with no filter (a filter drops entries, and the counters would lie),
// streaming over the bootstrap's cluster to the agent (envoy_grpc cluster_name xds.XDSCluster,
// transport API V3, a log name), and the HTTP one logs the response header x-aether-outcome. A
// listener served to a proxyless gRPC client (an api_listener) is not Envoy's: grpc-go has no
// access logger, and it is left alone.
func AccessLogs(res xds.Resources) []string {
	var out []string
	for _, l := range res.Listeners {
		if l.GetApiListener() != nil {
			continue
		}
		for _, fc := range listenerChains(l) {
			at := fmt.Sprintf("%s chain %q", resourceAt("listener", l.GetName()), fc.GetName())
			for _, f := range fc.GetFilters() {
				hcm, proxy := &hcmv3.HttpConnectionManager{}, &tcpproxyv3.TcpProxy{}
				switch {
				case unpackAs(f.GetTypedConfig(), hcm):
					out = append(out, accessLogged(at+" HTTP connection manager", hcm.GetAccessLog(), httpGRPCLogger)...)
				case unpackAs(f.GetTypedConfig(), proxy):
					out = append(out, accessLogged(at+" tcp_proxy", proxy.GetAccessLog(), tcpGRPCLogger)...)
				}
			}
		}
	}
	return out
}

// accessLogged are the violations of at's access logs: none is the gRPC logger name to the
// agent, as AccessLogs says.
func accessLogged(at string, logs []*accesslogv3.AccessLog, name string) []string {
	var problems []string
	for _, log := range logs {
		if log.GetName() != name {
			continue
		}
		var common *grpcaccesslogv3.CommonGrpcAccessLogConfig
		var headers []string
		httpConfig, tcpConfig := &grpcaccesslogv3.HttpGrpcAccessLogConfig{}, &grpcaccesslogv3.TcpGrpcAccessLogConfig{}
		switch {
		case name == httpGRPCLogger && unpackAs(log.GetTypedConfig(), httpConfig):
			common, headers = httpConfig.GetCommonConfig(), httpConfig.GetAdditionalResponseHeadersToLog()
		case name == tcpGRPCLogger && unpackAs(log.GetTypedConfig(), tcpConfig):
			common = tcpConfig.GetCommonConfig()
		default:
			problems = append(problems, fmt.Sprintf("%s: its %s access log holds a %s", at, name, log.GetTypedConfig().GetTypeUrl()))
			continue
		}
		problem := ""
		switch cluster := common.GetGrpcService().GetEnvoyGrpc().GetClusterName(); {
		case log.GetFilter() != nil:
			problem = "has a filter: entries it drops are never counted"
		case cluster != xds.XDSCluster:
			problem = fmt.Sprintf("streams to cluster %q, not the agent's %q", cluster, xds.XDSCluster)
		case common.GetTransportApiVersion() != corev3.ApiVersion_V3:
			problem = fmt.Sprintf("transport_api_version %s, want V3", common.GetTransportApiVersion())
		case common.GetLogName() == "":
			problem = "has no log_name"
		case name == httpGRPCLogger && !slices.Contains(headers, outcomeHeader):
			problem = "does not log the response header " + outcomeHeader + ": the destination's retry row is lost"
		default:
			return nil
		}
		problems = append(problems, fmt.Sprintf("%s: its %s access log %s", at, name, problem))
	}
	if len(problems) > 0 {
		return problems
	}
	return []string{fmt.Sprintf("%s: no %s access log to the agent: its traffic is neither counted nor logged", at, name)}
}
