// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package portspec

// AnnotationProxyless opts a managed pod's gRPC clients into proxyless xDS: with the value
// ProxylessGRPC, the pod webhook injects a gRPC xDS bootstrap (GRPC_XDS_BOOTSTRAP_CONFIG) and the
// mount of the node agent's proxyless xDS socket, and the agent serves the pod's clients the
// mesh's configuration (listeners, routes, clusters, endpoints, mTLS) for its identity. Without
// the annotation the pod's traffic takes the node's proxy, as always.
const AnnotationProxyless = "aether.io/proxyless"

// ProxylessGRPC is the one value of AnnotationProxyless: the pod's gRPC clients speak xDS.
const ProxylessGRPC = "grpc"

// proxylessFix is what an invalid AnnotationProxyless value is told.
const proxylessFix = `want "grpc" (the pod's gRPC clients dial xds:/// targets and get the mesh's configuration from the node agent), ` +
	"or remove the annotation (the pod's traffic then takes the node's proxy)"

// proxyless reads AnnotationProxyless: ProxylessGRPC, or "" when the annotation is absent.
func (p *parser) proxyless() string {
	v, ok := p.lookup(AnnotationProxyless, proxylessFix)
	if !ok {
		return ""
	}
	if v != ProxylessGRPC {
		p.fail(AnnotationProxyless, v, KindUnknownProxyless, proxylessFix+didYouMean(v, []string{ProxylessGRPC}),
			"unknown proxyless mode %q", v)
		return ""
	}
	return v
}
