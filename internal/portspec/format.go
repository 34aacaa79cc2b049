// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package portspec

import (
	"strconv"
	"strings"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
)

// protocolSuffix is the canonical suffix written for each protocol.
var protocolSuffix = map[meshv1alpha1.Protocol]string{
	meshv1alpha1.ProtocolHTTP: "h1", meshv1alpha1.ProtocolHTTP2: "h2", meshv1alpha1.ProtocolTCP: "tcp",
	meshv1alpha1.ProtocolUDP: "udp",
}

// FormatPortsAnnotation writes ports as a value of the endpoint.aether.io/ports annotation, every
// port with its explicit suffix, =grpc for a gRPC port: "8080=h1,9000=tcp,9090=h2,9091=grpc".
// (The display summary, "8080/HTTP,9000/TCP", is api/v1alpha1.FormatPorts.)
func FormatPortsAnnotation(ports []Port) string {
	tokens := make([]string, len(ports))
	for i, p := range ports {
		suffix := protocolSuffix[p.Protocol]
		if p.AppProtocol == meshv1alpha1.AppProtocolGRPC {
			suffix = string(meshv1alpha1.AppProtocolGRPC)
		}
		tokens[i] = strconv.Itoa(int(p.Port)) + "=" + suffix
	}
	return strings.Join(tokens, ",")
}

// Annotations writes s back in the grammar, in canonical form: every port with an explicit
// suffix (so endpoint.aether.io/protocol is never needed), defaults spelled out.
// Parse(s.Annotations()) returns s.
func (s Spec) Annotations() map[string]string {
	a := map[string]string{
		AnnotationPort:            strconv.Itoa(int(s.Primary)),
		AnnotationPorts:           FormatPortsAnnotation(s.Ports),
		AnnotationWeight:          strconv.Itoa(int(s.Weight)),
		AnnotationHealthPath:      s.HealthCheck.Path,
		AnnotationHealthCheckMode: s.HealthCheck.Mode,
	}
	for k, v := range s.Metadata {
		a[AnnotationMetadataPrefix+k] = v
	}
	if len(s.Upstreams) > 0 {
		a[AnnotationUpstreams] = strings.Join(s.Upstreams, ",")
	}
	if len(s.ExcludeOutboundPorts) > 0 {
		ports := make([]string, len(s.ExcludeOutboundPorts))
		for i, n := range s.ExcludeOutboundPorts {
			ports[i] = strconv.Itoa(int(n))
		}
		a[AnnotationExcludeOutboundPorts] = strings.Join(ports, ",")
	}
	if s.Proxyless != "" {
		a[AnnotationProxyless] = s.Proxyless
	}
	if s.NoIdentityGate {
		a[AnnotationIdentityGate] = IdentityGateOff
	}
	if s.NoMeshDNS {
		a[AnnotationMeshDNS] = MeshDNSOff
	}
	return a
}
