// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package portspec

import (
	"strconv"
	"strings"
)

// protocolSuffix is the canonical suffix written for each protocol.
var protocolSuffix = map[Protocol]string{HTTP: "h1", HTTP2: "h2", TCP: "tcp"}

// FormatPorts writes ports in the endpoint.aether.io/ports grammar, every port with its explicit
// suffix, =grpc for a gRPC port: "8080=h1,9000=tcp,9090=h2,9091=grpc".
func FormatPorts(ports []Port) string {
	tokens := make([]string, len(ports))
	for i, p := range ports {
		suffix := protocolSuffix[p.Protocol]
		if p.AppProtocol == GRPC {
			suffix = string(GRPC)
		}
		tokens[i] = strconv.Itoa(int(p.Number)) + "=" + suffix
	}
	return strings.Join(tokens, ",")
}

// Annotations writes s back in the grammar, in canonical form: every port with an explicit
// suffix (so endpoint.aether.io/protocol is never needed), defaults spelled out.
// Parse(s.Annotations()) returns s.
func (s Spec) Annotations() map[string]string {
	a := map[string]string{
		AnnotationPort:            strconv.Itoa(int(s.Primary)),
		AnnotationPorts:           FormatPorts(s.Ports),
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
	return a
}
