// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package portspec

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// Fixes and texts the rows below pin. The reserved-port texts are the admission webhook's
// denials, verbatim (DESIGN section 7): they are asserted whole.
const (
	portFix          = "(write a port number from 1 to 65535, for example 8080)"
	reservedFix      = "(serve the application on another port, for example 8080, and declare that one)"
	suffixFix        = "(want h1, h2, http2, grpc, tcp or udp"
	emptyElem        = `an element of the list is empty (remove the extra comma: ports are separated by single commas, for example "8080,9000=tcp")`
	weightFix        = "(write a number from 1 to 65535; the default is 1024)"
	pathFix          = `(write an absolute path without spaces, for example "/healthz")`
	modeFix          = "(want eds (the node agent probes) or active (every client proxy probes)"
	labelFix         = "(use lowercase letters, digits and '-', at most 63, starting and ending with a letter or digit)"
	reservedKey      = "(choose another key: ip, pod, cluster and namespace are the mesh's own routing keys)"
	upstreamFix      = `(list services as <name> or <name>.<namespace>, comma-separated, for example "payments,ledger.finance")`
	proxylessFixText = `(want "grpc" (the pod's gRPC clients dial xds:/// targets and get the mesh's configuration from the node agent), ` +
		"or remove the annotation (the pod's traffic then takes the node's proxy)"
	identityGateFixText = `(want "false" (the pod's containers start without waiting for its SPIFFE identity, and its first ` +
		`connections may fail until SPIRE issues it) or "true" (the default: they start once SPIRE has issued it)`
	unknownKey = "(the endpoint.aether.io/ annotations are port, ports, protocol, weight, health-path, health-check-mode and uds-socket"

	reserved18081 = "port 18081 is reserved: it is the mesh's HTTP proxy port, where the Host header decides " +
		"the destination; it is not a port of any service " + reservedFix
	reserved18082 = "port 18082 is reserved: it is the mesh's TCP port, which reaches a service's default TCP " +
		"port; it is not a port of any service " + reservedFix
	reserved18001  = "port 18001 is reserved: the mesh proxy receives captured outbound traffic on it inside every pod " + reservedFix
	reserved18008  = "port 18008 is reserved: the mesh proxy receives inbound mTLS traffic on it inside every pod " + reservedFix
	reserved18054  = "port 18054 is reserved: the mesh DNS answers the pod's DNS queries on it inside every pod " + reservedFix
	meshDNSFixText = `(want "false" (the pod's DNS queries go to its resolver untouched, and mesh names such as ` +
		`<service>.<namespace>.aether.internal do not resolve) or "true" (the default: the mesh DNS answers mesh names ` +
		`and forwards every other query)`
)

// malformed is one set of annotations the grammar refuses.
type malformed struct {
	annotations map[string]string
	// kinds are ErrorList.Kinds(), in order.
	kinds []Kind
	// token is the Token of the first error. It is empty only where the grammar has no token to
	// name: an empty value or list element, an empty metadata key, or a count over a whole list
	// (see tokenMayBeEmpty).
	token string
	// text are exact substrings of the error text, naming the token and the fix.
	text []string
	// full, when set, is the whole error text.
	full string
}

func one(key, value string) map[string]string { return map[string]string{key: value} }

// malformedRows is every malformed input the tests check; TestMalformedCount holds its size.
func malformedRows() map[string]malformed {
	overMeta, _ := metadataAnnotations(MaxMetadata + 1)
	badMetaToo := maps.Clone(overMeta)
	badMetaToo[AnnotationMetadataPrefix+"Zone"] = "x"

	rows := map[string]malformed{
		// Empty.
		"port empty": {
			annotations: one(AnnotationPort, ""),
			kinds:       []Kind{KindEmpty},
			full:        `endpoint.aether.io/port: "": the value is empty ` + portFix,
		},
		"port blank": {
			annotations: one(AnnotationPort, " \t "),
			kinds:       []Kind{KindEmpty}, token: " \t ",
			text: []string{`endpoint.aether.io/port: " \t ": the value is empty`, portFix},
		},
		"ports empty": {
			annotations: one(AnnotationPorts, ""),
			kinds:       []Kind{KindEmpty},
			full:        `endpoint.aether.io/ports: "": the value is empty (list the ports served, for example "8080,9090=h2,9000=tcp")`,
		},
		"ports blank": {
			annotations: one(AnnotationPorts, "  "),
			kinds:       []Kind{KindEmpty}, token: "  ",
			text: []string{`"  ": the value is empty (list the ports served`},
		},
		"ports with an empty element": {
			annotations: one(AnnotationPorts, "8080,,9000"),
			kinds:       []Kind{KindEmpty},
			full:        `endpoint.aether.io/ports: "8080,,9000": ` + emptyElem,
		},
		"ports with a blank element": {
			annotations: one(AnnotationPorts, "8080, ,9000"),
			kinds:       []Kind{KindEmpty},
			text:        []string{`"8080, ,9000": ` + emptyElem},
		},
		"ports with a trailing comma": {
			annotations: one(AnnotationPorts, "8080,9000=tcp,"),
			kinds:       []Kind{KindEmpty},
			text:        []string{`"8080,9000=tcp,": ` + emptyElem},
		},
		"ports with a leading comma": {
			annotations: one(AnnotationPorts, ",8080"),
			kinds:       []Kind{KindEmpty},
			text:        []string{`",8080": ` + emptyElem},
		},
		"ports of a comma alone: two empty elements": {
			annotations: one(AnnotationPorts, ","),
			kinds:       []Kind{KindEmpty, KindEmpty},
			text:        []string{`",": ` + emptyElem},
		},
		"protocol empty": {
			annotations: one(AnnotationProtocol, ""),
			kinds:       []Kind{KindEmpty},
			full:        `endpoint.aether.io/protocol: "": the value is empty (want http, tcp or udp)`,
		},
		"weight empty": {
			annotations: one(AnnotationWeight, ""),
			kinds:       []Kind{KindEmpty},
			full:        `endpoint.aether.io/weight: "": the value is empty ` + weightFix,
		},
		"health-path empty": {
			annotations: one(AnnotationHealthPath, ""),
			kinds:       []Kind{KindEmpty},
			full:        `endpoint.aether.io/health-path: "": the value is empty ` + pathFix,
		},
		"health-check-mode empty": {
			annotations: one(AnnotationHealthCheckMode, ""),
			kinds:       []Kind{KindEmpty},
			full:        `endpoint.aether.io/health-check-mode: "": the value is empty ` + modeFix + ")",
		},
		"upstreams empty": {
			annotations: one(AnnotationUpstreams, ""),
			kinds:       []Kind{KindEmpty},
			full:        `config.aether.io/upstreams: "": the value is empty ` + upstreamFix,
		},
		"upstreams with an empty element": {
			annotations: one(AnnotationUpstreams, "payments,,ledger"),
			kinds:       []Kind{KindEmpty},
			full:        `config.aether.io/upstreams: "payments,,ledger": an element of the list is empty ` + upstreamFix,
		},
		"upstreams with a trailing comma": {
			annotations: one(AnnotationUpstreams, "payments,"),
			kinds:       []Kind{KindEmpty},
			text:        []string{`"payments,": an element of the list is empty`},
		},

		// NotAPort.
		"port abc": {
			annotations: one(AnnotationPort, "abc"),
			kinds:       []Kind{KindNotAPort}, token: "abc",
			full: `endpoint.aether.io/port: "abc": "abc" is not a port number ` + portFix,
		},
		"ports abc": {
			annotations: one(AnnotationPorts, "8080,abc"),
			kinds:       []Kind{KindNotAPort}, token: "abc",
			full: `endpoint.aether.io/ports: "8080,abc": "abc" is not a port number ` + portFix,
		},
		"port +80": {
			annotations: one(AnnotationPort, "+80"),
			kinds:       []Kind{KindNotAPort}, token: "+80",
			text: []string{`"+80" is not a port number ` + portFix},
		},
		"ports +80=tcp": {
			annotations: one(AnnotationPorts, "+80=tcp"),
			kinds:       []Kind{KindNotAPort}, token: "+80",
			text: []string{`"+80" is not a port number ` + portFix},
		},
		"port -1": {
			annotations: one(AnnotationPort, "-1"),
			kinds:       []Kind{KindNotAPort}, token: "-1",
			text: []string{`"-1" is not a port number`},
		},
		"ports -1": {
			annotations: one(AnnotationPorts, "8080,-1"),
			kinds:       []Kind{KindNotAPort}, token: "-1",
			text: []string{`"-1" is not a port number`},
		},
		"port 8 080": {
			annotations: one(AnnotationPort, "8 080"),
			kinds:       []Kind{KindNotAPort}, token: "8 080",
			text: []string{`"8 080" is not a port number`},
		},
		"ports 8 080=tcp": {
			annotations: one(AnnotationPorts, "8 080=tcp"),
			kinds:       []Kind{KindNotAPort}, token: "8 080",
			text: []string{`"8 080" is not a port number`},
		},
		"ports =tcp: the number is missing": {
			annotations: one(AnnotationPorts, "8080,=tcp"),
			kinds:       []Kind{KindNotAPort}, token: "=tcp",
			full: `endpoint.aether.io/ports: "8080,=tcp": a port number is missing in "=tcp" ` + portFix,
		},
		"ports = alone": {
			annotations: one(AnnotationPorts, "="),
			kinds:       []Kind{KindNotAPort}, token: "=",
			text: []string{`a port number is missing in "="`},
		},
		"port =tcp: the number is missing": {
			annotations: one(AnnotationPort, "=tcp"),
			kinds:       []Kind{KindNotAPort}, token: "=tcp",
			full: `endpoint.aether.io/port: "=tcp": a port number is missing in "=tcp" ` + portFix,
		},
		"port 0x50": {
			annotations: one(AnnotationPort, "0x50"),
			kinds:       []Kind{KindNotAPort}, token: "0x50",
			text: []string{`"0x50" is not a port number`},
		},
		"ports 0x50=h2": {
			annotations: one(AnnotationPorts, "0x50=h2"),
			kinds:       []Kind{KindNotAPort}, token: "0x50",
			text: []string{`"0x50" is not a port number`},
		},
		"ports 80.0": {
			annotations: one(AnnotationPorts, "80.0"),
			kinds:       []Kind{KindNotAPort}, token: "80.0",
			text: []string{`"80.0" is not a port number`},
		},
		"ports 1e3": {
			annotations: one(AnnotationPorts, "1e3"),
			kinds:       []Kind{KindNotAPort}, token: "1e3",
			text: []string{`"1e3" is not a port number`},
		},
		"port 8080/tcp": {
			annotations: one(AnnotationPort, "8080/tcp"),
			kinds:       []Kind{KindNotAPort}, token: "8080/tcp",
			text: []string{`"8080/tcp" is not a port number`},
		},
		"ports 8080:tcp": {
			annotations: one(AnnotationPorts, "8080:tcp"),
			kinds:       []Kind{KindNotAPort}, token: "8080:tcp",
			text: []string{`"8080:tcp" is not a port number`},
		},
		"ports separated by spaces": {
			annotations: one(AnnotationPorts, "8080 9090"),
			kinds:       []Kind{KindNotAPort}, token: "8080 9090",
			text: []string{`"8080 9090" is not a port number`},
		},
		"ports separated by semicolons": {
			annotations: one(AnnotationPorts, "8080;9090=h2"),
			kinds:       []Kind{KindNotAPort}, token: "8080;9090",
			text: []string{`"8080;9090" is not a port number`},
		},
		"port in fullwidth digits": {
			annotations: one(AnnotationPort, "８０８０"),
			kinds:       []Kind{KindNotAPort}, token: "８０８０",
			text: []string{`"８０８０" is not a port number`},
		},
		"port named http": {
			annotations: one(AnnotationPort, "http"),
			kinds:       []Kind{KindNotAPort}, token: "http",
			text: []string{`"http" is not a port number`},
		},

		// PortOutOfRange.
		"port 0": {
			annotations: one(AnnotationPort, "0"),
			kinds:       []Kind{KindPortOutOfRange}, token: "0",
			full: `endpoint.aether.io/port: "0": port 0 is outside 1..65535 ` + portFix,
		},
		"ports 0": {
			annotations: one(AnnotationPorts, "0"),
			kinds:       []Kind{KindPortOutOfRange}, token: "0",
			text: []string{`port 0 is outside 1..65535 ` + portFix},
		},
		"ports 0=tcp": {
			annotations: one(AnnotationPorts, "8080,0=tcp"),
			kinds:       []Kind{KindPortOutOfRange}, token: "0",
			text: []string{`port 0 is outside 1..65535`},
		},
		"ports 00000": {
			annotations: one(AnnotationPorts, "00000"),
			kinds:       []Kind{KindPortOutOfRange}, token: "00000",
			text: []string{`port 00000 is outside 1..65535`},
		},
		"port 65536": {
			annotations: one(AnnotationPort, "65536"),
			kinds:       []Kind{KindPortOutOfRange}, token: "65536",
			text: []string{`port 65536 is outside 1..65535`},
		},
		"ports 65536=h2": {
			annotations: one(AnnotationPorts, "65536=h2"),
			kinds:       []Kind{KindPortOutOfRange}, token: "65536",
			text: []string{`port 65536 is outside 1..65535`},
		},
		"port 99999999999": {
			annotations: one(AnnotationPort, "99999999999"),
			kinds:       []Kind{KindPortOutOfRange}, token: "99999999999",
			text: []string{`port 99999999999 is outside 1..65535`},
		},
		"ports 99999999999=tcp": {
			annotations: one(AnnotationPorts, "99999999999=tcp"),
			kinds:       []Kind{KindPortOutOfRange}, token: "99999999999",
			text: []string{`port 99999999999 is outside 1..65535`},
		},
		"port 4294967296 (2^32)": {
			annotations: one(AnnotationPort, "4294967296"),
			kinds:       []Kind{KindPortOutOfRange}, token: "4294967296",
			text: []string{`port 4294967296 is outside 1..65535`},
		},
		"port 4294975376 (8080 + 2^32)": {
			annotations: one(AnnotationPort, "4294975376"),
			kinds:       []Kind{KindPortOutOfRange}, token: "4294975376",
			text: []string{`port 4294975376 is outside 1..65535`},
		},

		// ReservedPort, beyond the generated rows below.
		"port 18081 in full": {
			annotations: one(AnnotationPort, "18081"),
			kinds:       []Kind{KindReservedPort}, token: "18081",
			full: `endpoint.aether.io/port: "18081": ` + reserved18081,
		},
		"port 18082 in full": {
			annotations: one(AnnotationPort, "18082"),
			kinds:       []Kind{KindReservedPort}, token: "18082",
			full: `endpoint.aether.io/port: "18082": ` + reserved18082,
		},
		"ports 18081 in full": {
			annotations: one(AnnotationPorts, "8080,18081"),
			kinds:       []Kind{KindReservedPort}, token: "18081",
			full: `endpoint.aether.io/ports: "8080,18081": ` + reserved18081,
		},
		"ports 18082=tcp in full": {
			annotations: one(AnnotationPorts, "8080,18082=tcp"),
			kinds:       []Kind{KindReservedPort}, token: "18082",
			full: `endpoint.aether.io/ports: "8080,18082=tcp": ` + reserved18082,
		},
		"port 18001": {
			annotations: one(AnnotationPort, "18001"),
			kinds:       []Kind{KindReservedPort}, token: "18001",
			full: `endpoint.aether.io/port: "18001": ` + reserved18001,
		},
		"port 18054": {
			annotations: one(AnnotationPort, "18054"),
			kinds:       []Kind{KindReservedPort}, token: "18054",
			full: `endpoint.aether.io/port: "18054": ` + reserved18054,
		},
		"port 18008": {
			annotations: one(AnnotationPort, "18008"),
			kinds:       []Kind{KindReservedPort}, token: "18008",
			full: `endpoint.aether.io/port: "18008": ` + reserved18008,
		},
		"port 18081 with a suffix: reserved, whatever the suffix": {
			annotations: one(AnnotationPort, "18081=tcp"),
			kinds:       []Kind{KindReservedPort}, token: "18081",
			text: []string{reserved18081},
		},
		"ports 18082 with an unknown suffix: reserved first": {
			annotations: one(AnnotationPorts, "18082=tpc"),
			kinds:       []Kind{KindReservedPort}, token: "18082",
			text: []string{reserved18082},
		},
		"ports 18081 with leading zeros": {
			annotations: one(AnnotationPorts, "018081"),
			kinds:       []Kind{KindReservedPort}, token: "018081",
			text: []string{reserved18081},
		},
		"ports 18082 with whitespace": {
			annotations: one(AnnotationPorts, " 18082 = tcp "),
			kinds:       []Kind{KindReservedPort}, token: "18082",
			text: []string{`endpoint.aether.io/ports: " 18082 = tcp ": ` + reserved18082},
		},
		"ports 18081 on a tcp pod": {
			annotations: map[string]string{AnnotationProtocol: "tcp", AnnotationPorts: "18081"},
			kinds:       []Kind{KindReservedPort}, token: "18081",
			text: []string{reserved18081},
		},

		// UnknownSuffix.
		"suffix tpc, did you mean tcp": {
			annotations: one(AnnotationPorts, "9000=tpc"),
			kinds:       []Kind{KindUnknownSuffix}, token: "9000=tpc",
			full: `endpoint.aether.io/ports: "9000=tpc": unknown protocol suffix "tpc" on port 9000 ` +
				`(want h1, h2, http2, grpc, tcp or udp; did you mean "tcp"?)`,
		},
		"suffix H2, did you mean h2": {
			annotations: one(AnnotationPorts, "9000=H2"),
			kinds:       []Kind{KindUnknownSuffix}, token: "9000=H2",
			text: []string{`unknown protocol suffix "H2" on port 9000 ` + suffixFix + `; did you mean "h2"?)`},
		},
		"suffix TCP, did you mean tcp": {
			annotations: one(AnnotationPorts, "9000=TCP"),
			kinds:       []Kind{KindUnknownSuffix}, token: "9000=TCP",
			text: []string{`unknown protocol suffix "TCP" on port 9000 ` + suffixFix + `; did you mean "tcp"?)`},
		},
		"suffix gRPC, did you mean grpc": {
			annotations: one(AnnotationPorts, "9090=gRPC"),
			kinds:       []Kind{KindUnknownSuffix}, token: "9090=gRPC",
			text: []string{`unknown protocol suffix "gRPC" on port 9090 ` + suffixFix + `; did you mean "grpc"?)`},
		},
		"suffix h2c, did you mean h2": {
			annotations: one(AnnotationPorts, "9090=h2c"),
			kinds:       []Kind{KindUnknownSuffix}, token: "9090=h2c",
			text: []string{`unknown protocol suffix "h2c" on port 9090 ` + suffixFix + `; did you mean "h2"?)`},
		},
		// http1 is one edit from http2 but means HTTP/1.1: suffixHints answers h1.
		"suffix http1": {
			annotations: one(AnnotationPorts, "9000=http1"),
			kinds:       []Kind{KindUnknownSuffix}, token: "9000=http1",
			text: []string{`unknown protocol suffix "http1" on port 9000 ` + suffixFix + `; did you mean "h1"?)`},
		},
		"suffix http": {
			annotations: one(AnnotationPorts, "9000=http"),
			kinds:       []Kind{KindUnknownSuffix}, token: "9000=http",
			text: []string{`unknown protocol suffix "http" on port 9000 ` + suffixFix},
		},
		"suffix dns, did you mean udp": {
			annotations: one(AnnotationPorts, "5353=dns"),
			kinds:       []Kind{KindUnknownSuffix}, token: "5353=dns",
			text: []string{`unknown protocol suffix "dns" on port 5353 ` + suffixFix + `; did you mean "udp"?)`},
		},
		"suffix UDP, did you mean udp": {
			annotations: one(AnnotationPorts, "5353=UDP"),
			kinds:       []Kind{KindUnknownSuffix}, token: "5353=UDP",
			text: []string{`unknown protocol suffix "UDP" on port 5353 ` + suffixFix + `; did you mean "udp"?)`},
		},
		"suffix quic, not routed": {
			annotations: one(AnnotationPorts, "443=quic"),
			kinds:       []Kind{KindUnknownSuffix}, token: "443=quic",
			full: `endpoint.aether.io/ports: "443=quic": unknown protocol suffix "quic" on port 443 (want h1, h2, http2, grpc, tcp or udp; ` +
				`the mesh does not route HTTP/3: declare the port =udp to carry its QUIC datagrams as plain UDP (unrouted: no Host, no HTTP routes), ` +
				`or serve HTTP/1.1 or HTTP/2 on it (=h1, =h2))`,
		},
		"suffix h3, not routed": {
			annotations: one(AnnotationPorts, "8443=h3"),
			kinds:       []Kind{KindUnknownSuffix}, token: "8443=h3",
			text: []string{`the mesh does not route HTTP/3: declare the port =udp`},
		},
		"one port number both tcp and udp": {
			annotations: one(AnnotationPorts, "53=tcp,53=udp"),
			kinds:       []Kind{KindProtocolConflict}, token: "53=udp",
			full: `endpoint.aether.io/ports: "53=tcp,53=udp": port 53 is declared twice, as TCP and as UDP: a port number carries one transport in the mesh ` +
				`(declare port 53 with one protocol; serve the other transport on another port and declare that one, for example "53=udp,54=tcp")`,
		},
		"one port number udp and http by default": {
			annotations: one(AnnotationPorts, "8080=udp,8080"),
			kinds:       []Kind{KindProtocolConflict}, token: "8080",
			text: []string{`port 8080 is declared twice, as UDP and as HTTP: a port number carries one transport`, `"8080=udp,8081=tcp"`},
		},
		"a udp port beside the mesh's own: the suggestion steps past it": {
			annotations: one(AnnotationPorts, "18080=udp,18080=h2"),
			kinds:       []Kind{KindProtocolConflict}, token: "18080=h2",
			text: []string{`"18080=udp,18083=tcp"`},
		},
		"udp on the primary as a suffix": {
			annotations: one(AnnotationPort, "5353=udp"),
			kinds:       []Kind{KindSuffixOnPrimary}, token: "5353=udp",
			text: []string{`write "5353" here and declare its protocol in endpoint.aether.io/ports, for example "5353=udp"`},
		},
		"a udp port on a pod that serves on a unix socket": {
			annotations: map[string]string{AnnotationPorts: "8080,5353=udp", AnnotationUDSSocket: "sock/app.sock"},
			kinds:       []Kind{KindProtocolConflict}, token: "sock/app.sock",
			full: `endpoint.aether.io/uds-socket: "sock/app.sock": the pod serves on a Unix stream socket, and port 5353 is declared udp: ` +
				`the socket takes no datagrams (serve port 5353's UDP on the pod's network (remove endpoint.aether.io/uds-socket), or declare no udp port)`,
		},
		"suffix empty": {
			annotations: one(AnnotationPorts, "9000="),
			kinds:       []Kind{KindUnknownSuffix}, token: "9000=",
			full: `endpoint.aether.io/ports: "9000=": port 9000 has an empty protocol suffix (want h1, h2, http2, grpc, tcp or udp, or drop the =)`,
		},
		"suffix blank": {
			annotations: one(AnnotationPorts, "8080,9000= "),
			kinds:       []Kind{KindUnknownSuffix}, token: "9000=",
			text: []string{`port 9000 has an empty protocol suffix`},
		},
		"two suffixes": {
			annotations: one(AnnotationPorts, "9000=tcp=h2"),
			kinds:       []Kind{KindUnknownSuffix}, token: "9000=tcp=h2",
			text: []string{`unknown protocol suffix "tcp=h2" on port 9000 ` + suffixFix + ")"},
		},
		"suffix tpc on a tcp pod": {
			annotations: map[string]string{AnnotationProtocol: "tcp", AnnotationPorts: "9000=tpc"},
			kinds:       []Kind{KindUnknownSuffix}, token: "9000=tpc",
			text: []string{`unknown protocol suffix "tpc" on port 9000`, `did you mean "tcp"?`},
		},

		// SuffixOnPrimary.
		"primary with tcp": {
			annotations: one(AnnotationPort, "9000=tcp"),
			kinds:       []Kind{KindSuffixOnPrimary}, token: "9000=tcp",
			full: `endpoint.aether.io/port: "9000=tcp": the primary port takes no protocol suffix ("tcp") ` +
				`(write "9000" here and declare its protocol in endpoint.aether.io/ports, for example "9000=tcp")`,
		},
		"primary with h2": {
			annotations: one(AnnotationPort, "9090=h2"),
			kinds:       []Kind{KindSuffixOnPrimary}, token: "9090=h2",
			text: []string{`the primary port takes no protocol suffix ("h2")`, `for example "9090=h2"`},
		},
		"primary with grpc, even when listed": {
			annotations: map[string]string{AnnotationPort: "9090=grpc", AnnotationPorts: "9090=grpc"},
			kinds:       []Kind{KindSuffixOnPrimary}, token: "9090=grpc",
			text: []string{`the primary port takes no protocol suffix ("grpc")`},
		},
		"primary with an empty suffix": {
			annotations: one(AnnotationPort, "9000="),
			kinds:       []Kind{KindSuffixOnPrimary}, token: "9000=",
			text: []string{`the primary port takes no protocol suffix ("")`, `write "9000" here`},
		},
		"primary with an unknown suffix": {
			annotations: one(AnnotationPort, "9000=tpc"),
			kinds:       []Kind{KindSuffixOnPrimary}, token: "9000=tpc",
			text: []string{`the primary port takes no protocol suffix ("tpc")`},
		},
		"primary with spaces around the suffix": {
			annotations: one(AnnotationPort, " 9000 = tcp "),
			kinds:       []Kind{KindSuffixOnPrimary}, token: "9000 = tcp",
			text: []string{`the primary port takes no protocol suffix (" tcp")`, `write "9000" here`},
		},

		// ProtocolConflict.
		"8080 and 8080=tcp": {
			annotations: one(AnnotationPorts, "8080,8080=tcp"),
			kinds:       []Kind{KindProtocolConflict}, token: "8080=tcp",
			full: `endpoint.aether.io/ports: "8080,8080=tcp": port 8080 is declared twice, as HTTP and as TCP ` +
				`(declare each port once, with one protocol)`,
		},
		"9000=h2 and 9000=tcp": {
			annotations: one(AnnotationPorts, "9000=h2,9000=tcp"),
			kinds:       []Kind{KindProtocolConflict}, token: "9000=tcp",
			text: []string{`port 9000 is declared twice, as HTTP2 and as TCP (declare each port once, with one protocol)`},
		},
		"9000=tcp and 9000=h1": {
			annotations: one(AnnotationPorts, "9000=tcp,9000=h1"),
			kinds:       []Kind{KindProtocolConflict}, token: "9000=h1",
			text: []string{`port 9000 is declared twice, as TCP and as HTTP`},
		},
		"9090=grpc and 9090=h1": {
			annotations: one(AnnotationPorts, "9090=grpc,9090=h1"),
			kinds:       []Kind{KindProtocolConflict}, token: "9090=h1",
			text: []string{`port 9090 is declared twice, as HTTP2 and as HTTP`},
		},
		"one port three ways": {
			annotations: one(AnnotationPorts, "9000=h2,9000=tcp,9000=h1"),
			kinds:       []Kind{KindProtocolConflict, KindProtocolConflict}, token: "9000=tcp",
			text: []string{`as HTTP2 and as TCP`, `as HTTP2 and as HTTP (`},
		},
		"unsuffixed on a tcp pod and h2": {
			annotations: map[string]string{AnnotationProtocol: "tcp", AnnotationPorts: "9000,9000=h2"},
			kinds:       []Kind{KindProtocolConflict}, token: "9000=h2",
			text: []string{`port 9000 is declared twice, as TCP and as HTTP2`},
		},
		"conflict with whitespace": {
			annotations: one(AnnotationPorts, " 9000 = tcp , 9000=h2 "),
			kinds:       []Kind{KindProtocolConflict}, token: "9000=h2",
			text: []string{`port 9000 is declared twice, as TCP and as HTTP2`},
		},

		// TooManyPorts.
		"65 ports: 64 listed and the primary": {
			annotations: one(AnnotationPorts, portList(1, MaxPorts, "tcp")),
			kinds:       []Kind{KindTooManyPorts},
			text:        []string{`65 ports are declared; at most 64 are allowed (split the workload, or declare only the ports clients dial)`},
		},
		"65 ports listed, the primary among them": {
			annotations: map[string]string{AnnotationPort: "1", AnnotationPorts: portList(1, MaxPorts+1, "")},
			kinds:       []Kind{KindTooManyPorts},
			text:        []string{`65 ports are declared; at most 64 are allowed`},
		},
		"101 ports on a tcp pod": {
			annotations: map[string]string{AnnotationProtocol: "tcp", AnnotationPorts: portList(20000, 100, "")},
			kinds:       []Kind{KindTooManyPorts},
			text:        []string{`101 ports are declared; at most 64 are allowed`},
		},
		"too many ports and a bad one: the count comes last": {
			annotations: one(AnnotationPorts, "0,"+portList(1, MaxPorts, "")),
			kinds:       []Kind{KindPortOutOfRange, KindTooManyPorts}, token: "0",
			text: []string{`port 0 is outside 1..65535`, `65 ports are declared`},
		},

		// UnknownProtocol.
		"protocol sctp": {
			annotations: one(AnnotationProtocol, "sctp"),
			kinds:       []Kind{KindUnknownProtocol}, token: "sctp",
			text: []string{`endpoint.aether.io/protocol: "sctp": unknown protocol "sctp" (want http, tcp or udp`},
		},
		"protocol UDP, did you mean udp": {
			annotations: one(AnnotationProtocol, "UDP"),
			kinds:       []Kind{KindUnknownProtocol}, token: "UDP",
			full: `endpoint.aether.io/protocol: "UDP": unknown protocol "UDP" (want http, tcp or udp; did you mean "udp"?)`,
		},
		"protocol HTTP, did you mean http": {
			annotations: one(AnnotationProtocol, "HTTP"),
			kinds:       []Kind{KindUnknownProtocol}, token: "HTTP",
			full: `endpoint.aether.io/protocol: "HTTP": unknown protocol "HTTP" (want http, tcp or udp; did you mean "http"?)`,
		},
		"protocol TCP, did you mean tcp": {
			annotations: one(AnnotationProtocol, "TCP"),
			kinds:       []Kind{KindUnknownProtocol}, token: "TCP",
			text: []string{`unknown protocol "TCP" (want http, tcp or udp; did you mean "tcp"?)`},
		},
		"protocol h2, no suggestion": {
			annotations: one(AnnotationProtocol, "h2"),
			kinds:       []Kind{KindUnknownProtocol}, token: "h2",
			full: `endpoint.aether.io/protocol: "h2": unknown protocol "h2" (want http, tcp or udp)`,
		},
		"protocol grpc": {
			annotations: one(AnnotationProtocol, "grpc"),
			kinds:       []Kind{KindUnknownProtocol}, token: "grpc",
			text: []string{`unknown protocol "grpc" (want http, tcp or udp`},
		},
		"protocol http,tcp": {
			annotations: one(AnnotationProtocol, "http,tcp"),
			kinds:       []Kind{KindUnknownProtocol}, token: "http,tcp",
			text: []string{`unknown protocol "http,tcp" (want http, tcp or udp`},
		},

		// InvalidWeight.
		"weight 0": {
			annotations: one(AnnotationWeight, "0"),
			kinds:       []Kind{KindInvalidWeight}, token: "0",
			full: `endpoint.aether.io/weight: "0": weight "0" is not a number from 1 to 65535 ` + weightFix,
		},
		"weight 65536": {
			annotations: one(AnnotationWeight, "65536"),
			kinds:       []Kind{KindInvalidWeight}, token: "65536",
			text: []string{`weight "65536" is not a number from 1 to 65535 ` + weightFix},
		},
		"weight -1": {
			annotations: one(AnnotationWeight, "-1"),
			kinds:       []Kind{KindInvalidWeight}, token: "-1",
			text: []string{`weight "-1" is not a number from 1 to 65535`},
		},
		"weight +5": {
			annotations: one(AnnotationWeight, "+5"),
			kinds:       []Kind{KindInvalidWeight}, token: "+5",
			text: []string{`weight "+5" is not a number from 1 to 65535`},
		},
		"weight abc": {
			annotations: one(AnnotationWeight, "abc"),
			kinds:       []Kind{KindInvalidWeight}, token: "abc",
			text: []string{`weight "abc" is not a number from 1 to 65535`},
		},
		"weight 1.5": {
			annotations: one(AnnotationWeight, "1.5"),
			kinds:       []Kind{KindInvalidWeight}, token: "1.5",
			text: []string{`weight "1.5" is not a number from 1 to 65535`},
		},
		"weight 1e3": {
			annotations: one(AnnotationWeight, "1e3"),
			kinds:       []Kind{KindInvalidWeight}, token: "1e3",
			text: []string{`weight "1e3" is not a number from 1 to 65535`},
		},
		"weight 0x10": {
			annotations: one(AnnotationWeight, "0x10"),
			kinds:       []Kind{KindInvalidWeight}, token: "0x10",
			text: []string{`weight "0x10" is not a number from 1 to 65535`},
		},
		"weight 1_000": {
			annotations: one(AnnotationWeight, "1_000"),
			kinds:       []Kind{KindInvalidWeight}, token: "1_000",
			text: []string{`weight "1_000" is not a number from 1 to 65535`},
		},
		"weight 1 024": {
			annotations: one(AnnotationWeight, "1 024"),
			kinds:       []Kind{KindInvalidWeight}, token: "1 024",
			text: []string{`weight "1 024" is not a number from 1 to 65535`},
		},
		"weight 99999999999": {
			annotations: one(AnnotationWeight, "99999999999"),
			kinds:       []Kind{KindInvalidWeight}, token: "99999999999",
			text: []string{`weight "99999999999" is not a number from 1 to 65535`},
		},

		// InvalidHealthPath.
		"health path without a leading slash": {
			annotations: one(AnnotationHealthPath, "healthz"),
			kinds:       []Kind{KindInvalidHealthPath}, token: "healthz",
			full: `endpoint.aether.io/health-path: "healthz": health path "healthz" must start with / and hold at most ` +
				`1024 printable characters without spaces ` + pathFix,
		},
		"health path with a space": {
			annotations: one(AnnotationHealthPath, "/health z"),
			kinds:       []Kind{KindInvalidHealthPath}, token: "/health z",
			text: []string{`health path "/health z" must start with /`, pathFix},
		},
		"health path with a tab": {
			annotations: one(AnnotationHealthPath, "/a\tb"),
			kinds:       []Kind{KindInvalidHealthPath}, token: "/a\tb",
			text: []string{`health path "/a\tb" must start with /`},
		},
		"health path not ASCII": {
			annotations: one(AnnotationHealthPath, "/héalth"),
			kinds:       []Kind{KindInvalidHealthPath}, token: "/héalth",
			text: []string{`health path "/héalth" must start with /`},
		},
		"health path with DEL": {
			annotations: one(AnnotationHealthPath, "/x\x7f"),
			kinds:       []Kind{KindInvalidHealthPath}, token: "/x\x7f",
			text: []string{`health path "/x\x7f" must start with /`},
		},
		"health path a URL": {
			annotations: one(AnnotationHealthPath, "http://localhost:8080/healthz"),
			kinds:       []Kind{KindInvalidHealthPath}, token: "http://localhost:8080/healthz",
			text: []string{`health path "http://localhost:8080/healthz" must start with /`},
		},
		// A health path over MaxHealthPath is TooLong (the one rule of every capped annotation),
		// no longer InvalidHealthPath.
		"health path too long": {
			annotations: one(AnnotationHealthPath, "/"+strings.Repeat("p", MaxHealthPath)),
			kinds:       []Kind{KindTooLong}, token: "/" + strings.Repeat("p", MaxQuoted-1) + "…",
			full: `endpoint.aether.io/health-path: "/` + strings.Repeat("p", MaxQuoted-1) + `…": the value is 1025 bytes long, ` +
				`over the cap of 1024 bytes, and is not parsed (shorten it to at most 1024 bytes: write an absolute path without spaces, for example "/healthz")`,
		},

		// UnknownHealthCheckMode.
		"health-check-mode Active, did you mean active": {
			annotations: one(AnnotationHealthCheckMode, "Active"),
			kinds:       []Kind{KindUnknownHealthCheckMode}, token: "Active",
			full: `endpoint.aether.io/health-check-mode: "Active": unknown health-check mode "Active" ` + modeFix +
				`; did you mean "active"?)`,
		},
		"health-check-mode EDS, did you mean eds": {
			annotations: one(AnnotationHealthCheckMode, "EDS"),
			kinds:       []Kind{KindUnknownHealthCheckMode}, token: "EDS",
			text: []string{`unknown health-check mode "EDS"`, `did you mean "eds"?`},
		},
		"health-check-mode passive": {
			annotations: one(AnnotationHealthCheckMode, "passive"),
			kinds:       []Kind{KindUnknownHealthCheckMode}, token: "passive",
			text: []string{`unknown health-check mode "passive" ` + modeFix},
		},
		"health-check-mode none": {
			annotations: one(AnnotationHealthCheckMode, "none"),
			kinds:       []Kind{KindUnknownHealthCheckMode}, token: "none",
			full: `endpoint.aether.io/health-check-mode: "none": unknown health-check mode "none" ` + modeFix + ")",
		},

		// UnknownProxyless.
		"proxyless gRPC, did you mean grpc": {
			annotations: one(AnnotationProxyless, "gRPC"),
			kinds:       []Kind{KindUnknownProxyless}, token: "gRPC",
			full: `aether.io/proxyless: "gRPC": unknown proxyless mode "gRPC" ` + proxylessFixText + `; did you mean "grpc"?)`,
		},
		"proxyless true": {
			annotations: one(AnnotationProxyless, "true"),
			kinds:       []Kind{KindUnknownProxyless}, token: "true",
			full: `aether.io/proxyless: "true": unknown proxyless mode "true" ` + proxylessFixText + ")",
		},
		"proxyless http": {
			annotations: one(AnnotationProxyless, "http"),
			kinds:       []Kind{KindUnknownProxyless}, token: "http",
			text: []string{`unknown proxyless mode "http"`, `want "grpc"`},
		},
		"proxyless empty": {
			annotations: one(AnnotationProxyless, ""),
			kinds:       []Kind{KindEmpty},
			full:        `aether.io/proxyless: "": the value is empty ` + proxylessFixText + ")",
		},
		"proxyless too long": {
			annotations: one(AnnotationProxyless, strings.Repeat("g", MaxShortValue+1)),
			kinds:       []Kind{KindTooLong}, token: strings.Repeat("g", MaxQuoted) + "…",
			text: []string{`the value is 65 bytes long, over the cap of 64 bytes, and is not parsed`},
		},

		// InvalidIdentityGate.
		"identity-gate False, did you mean false": {
			annotations: one(AnnotationIdentityGate, "False"),
			kinds:       []Kind{KindInvalidIdentityGate}, token: "False",
			full: `aether.io/identity-gate: "False": "False" is neither "true" nor "false" ` + identityGateFixText + `; did you mean "false"?)`,
		},
		"identity-gate off": {
			annotations: one(AnnotationIdentityGate, "off"),
			kinds:       []Kind{KindInvalidIdentityGate}, token: "off",
			full: `aether.io/identity-gate: "off": "off" is neither "true" nor "false" ` + identityGateFixText + ")",
		},
		"identity-gate 0": {
			annotations: one(AnnotationIdentityGate, "0"),
			kinds:       []Kind{KindInvalidIdentityGate}, token: "0",
			text: []string{`"0" is neither "true" nor "false"`, `want "false"`},
		},
		"identity-gate empty": {
			annotations: one(AnnotationIdentityGate, ""),
			kinds:       []Kind{KindEmpty},
			full:        `aether.io/identity-gate: "": the value is empty ` + identityGateFixText + ")",
		},
		"identity-gate too long": {
			annotations: one(AnnotationIdentityGate, strings.Repeat("f", MaxShortValue+1)),
			kinds:       []Kind{KindTooLong}, token: strings.Repeat("f", MaxQuoted) + "…",
			text: []string{`the value is 65 bytes long, over the cap of 64 bytes, and is not parsed`},
		},

		// InvalidMeshDNS.
		"mesh-dns False, did you mean false": {
			annotations: one(AnnotationMeshDNS, "False"),
			kinds:       []Kind{KindInvalidMeshDNS}, token: "False",
			full: `aether.io/mesh-dns: "False": "False" is neither "true" nor "false" ` + meshDNSFixText + `; did you mean "false"?)`,
		},
		"mesh-dns off": {
			annotations: one(AnnotationMeshDNS, "off"),
			kinds:       []Kind{KindInvalidMeshDNS}, token: "off",
			full: `aether.io/mesh-dns: "off": "off" is neither "true" nor "false" ` + meshDNSFixText + ")",
		},
		"mesh-dns empty": {
			annotations: one(AnnotationMeshDNS, ""),
			kinds:       []Kind{KindEmpty},
			full:        `aether.io/mesh-dns: "": the value is empty ` + meshDNSFixText + ")",
		},

		// InvalidMetadataKey.
		"metadata key uppercase": {
			annotations: one(AnnotationMetadataPrefix+"Zone", "a"),
			kinds:       []Kind{KindInvalidMetadataKey}, token: "Zone",
			full: `metadata.endpoint.aether.io/Zone: "a": metadata key "Zone" is not a DNS label ` + labelFix,
		},
		"metadata key ip": {
			annotations: one(AnnotationMetadataPrefix+"ip", "10.0.0.1"),
			kinds:       []Kind{KindInvalidMetadataKey}, token: "ip",
			full: `metadata.endpoint.aether.io/ip: "10.0.0.1": metadata key "ip" is reserved ` + reservedKey,
		},
		"metadata key pod": {
			annotations: one(AnnotationMetadataPrefix+"pod", "x"),
			kinds:       []Kind{KindInvalidMetadataKey}, token: "pod",
			text: []string{`metadata key "pod" is reserved ` + reservedKey},
		},
		"metadata key cluster": {
			annotations: one(AnnotationMetadataPrefix+"cluster", "x"),
			kinds:       []Kind{KindInvalidMetadataKey}, token: "cluster",
			text: []string{`metadata key "cluster" is reserved ` + reservedKey},
		},
		"metadata key namespace": {
			annotations: one(AnnotationMetadataPrefix+"namespace", "x"),
			kinds:       []Kind{KindInvalidMetadataKey}, token: "namespace",
			text: []string{`metadata key "namespace" is reserved ` + reservedKey},
		},
		"metadata key too long": {
			annotations: one(AnnotationMetadataPrefix+strings.Repeat("k", 64), "x"),
			kinds:       []Kind{KindInvalidMetadataKey}, token: strings.Repeat("k", 64),
			text: []string{`metadata key "` + strings.Repeat("k", 64) + `" is not a DNS label ` + labelFix},
		},
		"metadata key starting with a dash": {
			annotations: one(AnnotationMetadataPrefix+"-zone", "x"),
			kinds:       []Kind{KindInvalidMetadataKey}, token: "-zone",
			text: []string{`metadata key "-zone" is not a DNS label`},
		},
		"metadata key ending with a dash": {
			annotations: one(AnnotationMetadataPrefix+"zone-", "x"),
			kinds:       []Kind{KindInvalidMetadataKey}, token: "zone-",
			text: []string{`metadata key "zone-" is not a DNS label`},
		},
		"metadata key with an underscore": {
			annotations: one(AnnotationMetadataPrefix+"zone_a", "x"),
			kinds:       []Kind{KindInvalidMetadataKey}, token: "zone_a",
			text: []string{`metadata key "zone_a" is not a DNS label`},
		},
		"metadata key with a dot": {
			annotations: one(AnnotationMetadataPrefix+"topology.zone", "x"),
			kinds:       []Kind{KindInvalidMetadataKey}, token: "topology.zone",
			text: []string{`metadata key "topology.zone" is not a DNS label`},
		},
		"metadata key not ASCII": {
			annotations: one(AnnotationMetadataPrefix+"zöne", "x"),
			kinds:       []Kind{KindInvalidMetadataKey}, token: "zöne",
			text: []string{`metadata key "zöne" is not a DNS label`},
		},
		"metadata key empty": {
			annotations: one(AnnotationMetadataPrefix, "x"),
			kinds:       []Kind{KindInvalidMetadataKey},
			full:        `metadata.endpoint.aether.io/: "x": metadata key "" is not a DNS label ` + labelFix,
		},

		// InvalidMetadataValue.
		"metadata value too long": {
			annotations: one(AnnotationMetadataPrefix+"blob", strings.Repeat("v", MaxMetadataValue+1)),
			kinds:       []Kind{KindInvalidMetadataValue}, token: strings.Repeat("v", MaxQuoted) + "…",
			text: []string{`metadata value is 257 bytes long (shorten it to at most 256 bytes)`},
		},
		"metadata value too long in bytes, not in runes": {
			annotations: one(AnnotationMetadataPrefix+"blob", strings.Repeat("é", 129)),
			kinds:       []Kind{KindInvalidMetadataValue}, token: strings.Repeat("é", MaxQuoted/2) + "…",
			text: []string{`metadata value is 258 bytes long (shorten it to at most 256 bytes)`},
		},

		// TooManyMetadata.
		"33 metadata keys": {
			annotations: overMeta,
			kinds:       []Kind{KindTooManyMetadata},
			text:        []string{`metadata.endpoint.aether.io/*: "": 33 metadata keys are declared; at most 32 are allowed (keep only the keys clients route on)`},
		},
		"33 metadata keys and a bad one: the count comes first": {
			annotations: badMetaToo,
			kinds:       []Kind{KindTooManyMetadata, KindInvalidMetadataKey},
			text:        []string{`33 metadata keys are declared`, `metadata key "Zone" is not a DNS label`},
		},

		// InvalidUpstream.
		"upstream uppercase": {
			annotations: one(AnnotationUpstreams, "Payments"),
			kinds:       []Kind{KindInvalidUpstream}, token: "Payments",
			full: `config.aether.io/upstreams: "Payments": "Payments" is not a service name ` + upstreamFix,
		},
		"upstream with two dots": {
			annotations: one(AnnotationUpstreams, "ledger.finance.svc"),
			kinds:       []Kind{KindInvalidUpstream}, token: "ledger.finance.svc",
			text: []string{`"ledger.finance.svc" is not a service name`},
		},
		"upstream with an underscore": {
			annotations: one(AnnotationUpstreams, "pay_ments"),
			kinds:       []Kind{KindInvalidUpstream}, token: "pay_ments",
			text: []string{`"pay_ments" is not a service name`},
		},
		"upstream starting with a dash": {
			annotations: one(AnnotationUpstreams, "ok,-payments"),
			kinds:       []Kind{KindInvalidUpstream}, token: "-payments",
			text: []string{`"-payments" is not a service name`},
		},
		"upstream with an empty namespace": {
			annotations: one(AnnotationUpstreams, "payments."),
			kinds:       []Kind{KindInvalidUpstream}, token: "payments.",
			text: []string{`"payments." is not a service name`},
		},
		"upstream with an empty name": {
			annotations: one(AnnotationUpstreams, ".finance"),
			kinds:       []Kind{KindInvalidUpstream}, token: ".finance",
			text: []string{`".finance" is not a service name`},
		},
		"upstream with a slash": {
			annotations: one(AnnotationUpstreams, "finance/ledger"),
			kinds:       []Kind{KindInvalidUpstream}, token: "finance/ledger",
			text: []string{`"finance/ledger" is not a service name`},
		},
		"upstream with an uppercase namespace": {
			annotations: one(AnnotationUpstreams, "ledger.Finance"),
			kinds:       []Kind{KindInvalidUpstream}, token: "ledger.Finance",
			text: []string{`"ledger.Finance" is not a service name`},
		},
		"upstream with a port": {
			annotations: one(AnnotationUpstreams, "payments:8080"),
			kinds:       []Kind{KindInvalidUpstream}, token: "payments:8080",
			text: []string{`"payments:8080" is not a service name`},
		},
		"upstream a URL": {
			annotations: one(AnnotationUpstreams, "http://payments"),
			kinds:       []Kind{KindInvalidUpstream}, token: "http://payments",
			text: []string{`"http://payments" is not a service name`},
		},
		"upstream name too long": {
			annotations: one(AnnotationUpstreams, strings.Repeat("s", 64)),
			kinds:       []Kind{KindInvalidUpstream}, token: strings.Repeat("s", 64),
			text: []string{`"` + strings.Repeat("s", 64) + `" is not a service name`},
		},
		"upstreams separated by spaces": {
			annotations: one(AnnotationUpstreams, "payments ledger"),
			kinds:       []Kind{KindInvalidUpstream}, token: "payments ledger",
			text: []string{`"payments ledger" is not a service name`},
		},

		// Excluded outbound ports.
		"exclude-outbound-ports empty": {
			annotations: one(AnnotationExcludeOutboundPorts, ""),
			kinds:       []Kind{KindEmpty},
			full: `aether.io/exclude-outbound-ports: "": the value is empty ` +
				`(list destination ports the pod reaches directly, comma-separated, for example "5432,6379")`,
		},
		"exclude-outbound-ports empty element": {
			annotations: one(AnnotationExcludeOutboundPorts, "5432,,6379"),
			kinds:       []Kind{KindEmpty},
			text:        []string{`an element of the list is empty (remove the extra comma`},
		},
		"exclude-outbound-ports a range": {
			annotations: one(AnnotationExcludeOutboundPorts, "5432-5440"),
			kinds:       []Kind{KindNotAPort}, token: "5432-5440",
			full: `aether.io/exclude-outbound-ports: "5432-5440": "5432-5440" is not a port number (one port per element, no ranges) ` +
				`(write a destination port number from 1 to 65535, for example 5432)`,
		},
		"exclude-outbound-ports a name": {
			annotations: one(AnnotationExcludeOutboundPorts, "postgres"),
			kinds:       []Kind{KindNotAPort}, token: "postgres",
			text: []string{`"postgres" is not a port number`},
		},
		"exclude-outbound-ports zero": {
			annotations: one(AnnotationExcludeOutboundPorts, "0"),
			kinds:       []Kind{KindPortOutOfRange}, token: "0",
			text: []string{"port 0 is outside 1..65535"},
		},
		"exclude-outbound-ports over 65535": {
			annotations: one(AnnotationExcludeOutboundPorts, "5432,65536"),
			kinds:       []Kind{KindPortOutOfRange}, token: "65536",
			text: []string{"port 65536 is outside 1..65535"},
		},
		"exclude-outbound-ports 18082": {
			annotations: one(AnnotationExcludeOutboundPorts, "18082"),
			kinds:       []Kind{KindReservedPort}, token: "18082",
			full: `aether.io/exclude-outbound-ports: "18082": port 18082 is the mesh's own: it is the mesh's TCP port, which ` +
				`reaches a service's default TCP port; it is not a port of any service (remove 18082: excluding it would take ` +
				`the pod's calls into the mesh out of the mesh)`,
		},
		"exclude-outbound-ports 18081": {
			annotations: one(AnnotationExcludeOutboundPorts, "18081"),
			kinds:       []Kind{KindReservedPort}, token: "18081",
			text: []string{"port 18081 is the mesh's own", "(remove 18081: excluding it would take"},
		},
		"exclude-outbound-ports 18001": {
			annotations: one(AnnotationExcludeOutboundPorts, "18001"),
			kinds:       []Kind{KindReservedPort}, token: "18001",
			full: `aether.io/exclude-outbound-ports: "18001": port 18001 is the mesh proxy's own: the mesh proxy receives ` +
				`captured outbound traffic on it inside every pod (remove 18001: capture never takes the mesh proxy's own ports)`,
		},
		"exclude-outbound-ports 18008": {
			annotations: one(AnnotationExcludeOutboundPorts, "18008"),
			kinds:       []Kind{KindReservedPort}, token: "18008",
			text: []string{"port 18008 is the mesh proxy's own"},
		},
		"exclude-outbound-ports 18054": {
			annotations: one(AnnotationExcludeOutboundPorts, "18054"),
			kinds:       []Kind{KindReservedPort}, token: "18054",
			full: `aether.io/exclude-outbound-ports: "18054": port 18054 is the mesh's own: the mesh DNS answers the pod's DNS ` +
				`queries on it inside every pod (remove 18054; to leave the pod's DNS alone, set aether.io/mesh-dns: "false")`,
		},
		"exclude-outbound-ports too many": {
			annotations: one(AnnotationExcludeOutboundPorts, portList(20000, MaxPorts+1, "")),
			kinds:       []Kind{KindTooManyPorts},
			full: `aether.io/exclude-outbound-ports: "` + excerpt(portList(20000, MaxPorts+1, ""), MaxQuoted) +
				`": 65 ports are excluded; at most 64 are allowed (exclude only the ports the pod must reach directly)`,
		},

		// InvalidUDSSocket, InvalidUDSFile, UDSFileTooLong.
		"uds-socket emptyDir-style subPath": {
			annotations: one(AnnotationUDSSocket, "uds/sub/app.sock"),
			kinds:       []Kind{KindInvalidUDSSocket}, token: "uds/sub/app.sock",
			text: []string{`has 3 path segments`, `the name of the pod's csi.aether.io volume`},
		},
		"uds-socket absolute": {
			annotations: one(AnnotationUDSSocket, "/run/app/app.sock"),
			kinds:       []Kind{KindInvalidUDSSocket}, token: "/run/app/app.sock",
			text: []string{`is an absolute path`},
		},
		"uds-socket dot dot": {
			annotations: one(AnnotationUDSSocket, "../app.sock"),
			kinds:       []Kind{KindInvalidUDSSocket}, token: "../app.sock",
			text: []string{`holds a ".." segment`},
		},
		"uds-socket bad file": {
			annotations: one(AnnotationUDSSocket, "uds/app*.sock"),
			kinds:       []Kind{KindInvalidUDSFile}, token: "app*.sock",
			text: []string{`socket file name "app*.sock" is not a plain file name`},
		},
		"uds-socket file over budget": {
			annotations: one(AnnotationUDSSocket, "uds/"+strings.Repeat("x", 55)),
			kinds:       []Kind{KindUDSFileTooLong}, token: strings.Repeat("x", 55),
			text: []string{`is 55 bytes long, over its budget of 54 bytes`, `(shorten the socket file name to at most 54 bytes`},
		},

		// UnknownAnnotation.
		"prots, did you mean ports": {
			annotations: one("endpoint.aether.io/prots", "8080"),
			kinds:       []Kind{KindUnknownAnnotation}, token: "endpoint.aether.io/prots",
			full: `endpoint.aether.io/prots: "8080": unknown annotation "endpoint.aether.io/prots" ` + unknownKey +
				`; did you mean "endpoint.aether.io/ports"?)`,
		},
		"Port, did you mean port": {
			annotations: one("endpoint.aether.io/Port", "9000"),
			kinds:       []Kind{KindUnknownAnnotation}, token: "endpoint.aether.io/Port",
			text: []string{`unknown annotation "endpoint.aether.io/Port"`, `did you mean "endpoint.aether.io/port"?`},
		},
		"weigth, did you mean weight": {
			annotations: one("endpoint.aether.io/weigth", "10"),
			kinds:       []Kind{KindUnknownAnnotation}, token: "endpoint.aether.io/weigth",
			text: []string{`did you mean "endpoint.aether.io/weight"?`},
		},
		"healthpath, did you mean health-path": {
			annotations: one("endpoint.aether.io/healthpath", "/healthz"),
			kinds:       []Kind{KindUnknownAnnotation}, token: "endpoint.aether.io/healthpath",
			text: []string{`did you mean "endpoint.aether.io/health-path"?`},
		},
		"protocols, did you mean protocol": {
			annotations: one("endpoint.aether.io/protocols", "tcp"),
			kinds:       []Kind{KindUnknownAnnotation}, token: "endpoint.aether.io/protocols",
			text: []string{`did you mean "endpoint.aether.io/protocol"?`},
		},
		"upstreams under the wrong prefix, points at config.aether.io": {
			annotations: one("endpoint.aether.io/upstreams", "payments"),
			kinds:       []Kind{KindUnknownAnnotation}, token: "endpoint.aether.io/upstreams",
			full: `endpoint.aether.io/upstreams: "payments": unknown annotation "endpoint.aether.io/upstreams" ` + unknownKey + `; did you mean "config.aether.io/upstreams"?)`,
		},
		"the prefix alone": {
			annotations: one("endpoint.aether.io/", "x"),
			kinds:       []Kind{KindUnknownAnnotation}, token: "endpoint.aether.io/",
			text: []string{`unknown annotation "endpoint.aether.io/"`},
		},

		// TooLong: every capped annotation one byte over its cap, refused whole and not parsed
		// (so no error of what is inside), quoting only MaxQuoted bytes.
		"ports one byte over its cap": {
			annotations: one(AnnotationPorts, strings.Repeat(",", MaxPortsLength+1)),
			kinds:       []Kind{KindTooLong}, token: strings.Repeat(",", MaxQuoted) + "…",
			full: `endpoint.aether.io/ports: "` + strings.Repeat(",", MaxQuoted) + `…": the value is 4097 bytes long, over the cap of 4096 bytes, ` +
				`and is not parsed (shorten it to at most 4096 bytes: list the ports served, for example "8080,9090=h2,9000=tcp")`,
		},
		"upstreams one byte over its cap": {
			annotations: one(AnnotationUpstreams, strings.Repeat("a", MaxUpstreamsLength+1)),
			kinds:       []Kind{KindTooLong}, token: strings.Repeat("a", MaxQuoted) + "…",
			full: `config.aether.io/upstreams: "` + strings.Repeat("a", MaxQuoted) + `…": the value is 8193 bytes long, over the cap of 8192 bytes, ` +
				`and is not parsed (shorten it to at most 8192 bytes: ` + upstreamFix[1:],
		},
		"port one byte over its cap": {
			annotations: one(AnnotationPort, strings.Repeat("8", MaxShortValue+1)),
			kinds:       []Kind{KindTooLong}, token: strings.Repeat("8", MaxQuoted) + "…",
			full: `endpoint.aether.io/port: "` + strings.Repeat("8", MaxQuoted) + `…": the value is 65 bytes long, over the cap of 64 bytes, ` +
				`and is not parsed (shorten it to at most 64 bytes: write a port number from 1 to 65535, for example 8080)`,
		},
		"protocol one byte over its cap": {
			annotations: one(AnnotationProtocol, strings.Repeat("t", MaxShortValue+1)),
			kinds:       []Kind{KindTooLong}, token: strings.Repeat("t", MaxQuoted) + "…",
			text: []string{`the value is 65 bytes long, over the cap of 64 bytes, and is not parsed (shorten it to at most 64 bytes: want http, tcp or udp)`},
		},
		"weight one byte over its cap": {
			annotations: one(AnnotationWeight, strings.Repeat("1", MaxShortValue+1)),
			kinds:       []Kind{KindTooLong}, token: strings.Repeat("1", MaxQuoted) + "…",
			text: []string{`endpoint.aether.io/weight: "1111`, `the value is 65 bytes long, over the cap of 64 bytes`, `shorten it to at most 64 bytes: write a number from 1 to 65535`},
		},
		"health-check-mode one byte over its cap": {
			annotations: one(AnnotationHealthCheckMode, strings.Repeat("e", MaxShortValue+1)),
			kinds:       []Kind{KindTooLong}, token: strings.Repeat("e", MaxQuoted) + "…",
			text: []string{`the value is 65 bytes long, over the cap of 64 bytes`, `shorten it to at most 64 bytes: want eds`},
		},
		"a cut excerpt keeps whole runes": {
			annotations: one(AnnotationPorts, "9"+strings.Repeat("é", MaxPortsLength/2)),
			kinds:       []Kind{KindTooLong}, token: "9" + strings.Repeat("é", (MaxQuoted-1)/2) + "…",
			text: []string{`"9` + strings.Repeat("é", (MaxQuoted-1)/2) + `…": the value is 4097 bytes long`},
		},
		"a too-long ports does not hide the other annotations' errors": {
			annotations: map[string]string{AnnotationPorts: strings.Repeat("9", MaxPortsLength+1), AnnotationWeight: "0"},
			kinds:       []Kind{KindTooLong, KindInvalidWeight}, token: strings.Repeat("9", MaxQuoted) + "…",
			text: []string{`the value is 4097 bytes long`, `weight "0" is not a number`},
		},

		// MoreErrors: the first MaxErrors errors, then one line counting the rest.
		"a ports value of commas at its cap: ten errors, then a count": {
			annotations: one(AnnotationPorts, strings.Repeat(",", MaxPortsLength)),
			kinds: []Kind{
				KindEmpty, KindEmpty, KindEmpty, KindEmpty, KindEmpty, KindEmpty, KindEmpty, KindEmpty, KindEmpty, KindEmpty,
				KindMoreErrors,
			},
			full: strings.Repeat(`endpoint.aether.io/ports: "`+strings.Repeat(",", MaxQuoted)+`…": `+emptyElem+"\n", MaxErrors) +
				`and 4087 more errors (fix the errors above and apply again to see the rest)`,
		},
		"eleven bad ports: ten, then one more": {
			annotations: one(AnnotationPorts, "a,b,c,d,e,f,g,h,i,j,k"),
			kinds: []Kind{
				KindNotAPort, KindNotAPort, KindNotAPort, KindNotAPort, KindNotAPort, KindNotAPort, KindNotAPort, KindNotAPort,
				KindNotAPort, KindNotAPort, KindMoreErrors,
			},
			token: "a",
			text:  []string{`"j" is not a port number`, "\nand 1 more error (fix the errors above and apply again to see the rest)"},
		},
		"ten bad ports: all shown, no count": {
			annotations: one(AnnotationPorts, "a,b,c,d,e,f,g,h,i,j"),
			kinds: []Kind{
				KindNotAPort, KindNotAPort, KindNotAPort, KindNotAPort, KindNotAPort, KindNotAPort, KindNotAPort, KindNotAPort,
				KindNotAPort, KindNotAPort,
			},
			token: "a",
			text:  []string{`"j" is not a port number ` + portFix},
		},
		"errors of several annotations: the first ten by key, then a count": {
			annotations: map[string]string{
				AnnotationUpstreams: "A,B,C,D,E,F", AnnotationPorts: "a,b,c,d,e,f", AnnotationWeight: "0",
			},
			kinds: []Kind{
				KindInvalidUpstream, KindInvalidUpstream, KindInvalidUpstream, KindInvalidUpstream, KindInvalidUpstream, KindInvalidUpstream,
				KindNotAPort, KindNotAPort, KindNotAPort, KindNotAPort, KindMoreErrors,
			},
			token: "A",
			text:  []string{`"F" is not a service name`, `"d" is not a port number`, "\nand 3 more errors ("},
		},

		// Several errors at once: sorted by annotation key, then by position in the value.
		"one of everything, sorted by key then position": {
			annotations: map[string]string{
				AnnotationWeight:                "0",
				"endpoint.aether.io/prots":      "x",
				AnnotationPorts:                 "abc,18081,9000=tpc",
				AnnotationPort:                  "0",
				AnnotationUpstreams:             "A",
				"aether.io/managed":             "true",
				AnnotationMetadataPrefix:        "v",
				AnnotationMetadataPrefix + "ok": "v",
			},
			kinds: []Kind{
				KindInvalidUpstream,                               // config.aether.io/upstreams
				KindPortOutOfRange,                                // endpoint.aether.io/port
				KindNotAPort, KindReservedPort, KindUnknownSuffix, // endpoint.aether.io/ports, in order
				KindUnknownAnnotation,  // endpoint.aether.io/prots
				KindInvalidWeight,      // endpoint.aether.io/weight
				KindInvalidMetadataKey, // metadata.endpoint.aether.io/
			},
			token: "A",
			text:  []string{`"A" is not a service name`, `port 0 is outside`, `"abc" is not a port number`, reserved18081, `"tpc"`},
		},
		"every list error in one ports value, in position order": {
			annotations: one(AnnotationPorts, "9000=tpc,abc,0,,18082=tcp,9000=h2,9000=tcp"),
			kinds: []Kind{
				KindUnknownSuffix, KindNotAPort, KindPortOutOfRange, KindEmpty, KindReservedPort, KindProtocolConflict,
			},
			token: "9000=tpc",
			text:  []string{`"tpc"`, `"abc"`, `port 0 is`, emptyElem, reserved18082, `as HTTP2 and as TCP`},
		},
		"every single-valued annotation wrong": {
			annotations: map[string]string{
				AnnotationPort: "x", AnnotationProtocol: "sctp", AnnotationWeight: "0",
				AnnotationHealthPath: "h", AnnotationHealthCheckMode: "x",
			},
			kinds: []Kind{
				KindUnknownHealthCheckMode, KindInvalidHealthPath, KindNotAPort, KindUnknownProtocol, KindInvalidWeight,
			},
			token: "x",
			text:  []string{`unknown health-check mode "x"`, `health path "h"`, `"x" is not a port number`, `unknown protocol "sctp"`, `weight "0"`},
		},
		"every annotation empty": {
			annotations: map[string]string{
				AnnotationPort: "", AnnotationPorts: "", AnnotationProtocol: "", AnnotationWeight: "",
				AnnotationHealthPath: "", AnnotationHealthCheckMode: "", AnnotationUpstreams: "",
			},
			kinds: []Kind{KindEmpty, KindEmpty, KindEmpty, KindEmpty, KindEmpty, KindEmpty, KindEmpty},
			text:  []string{`config.aether.io/upstreams: "": the value is empty`, `endpoint.aether.io/weight: "": the value is empty`},
		},
		"metadata errors, in key order": {
			annotations: map[string]string{
				AnnotationMetadataPrefix + "x":    strings.Repeat("v", MaxMetadataValue+1),
				AnnotationMetadataPrefix + "ip":   "1",
				AnnotationMetadataPrefix + "Zone": "a",
				AnnotationMetadataPrefix + "ok":   "fine",
				AnnotationHealthPath:              "h",
				AnnotationUpstreams:               "a,,B",
			},
			kinds: []Kind{
				KindEmpty, KindInvalidUpstream, KindInvalidHealthPath,
				KindInvalidMetadataKey, KindInvalidMetadataKey, KindInvalidMetadataValue,
			},
			text: []string{`metadata key "Zone"`, `metadata key "ip" is reserved`, `metadata value is 257 bytes long`},
		},
		"an unknown key after an empty ports": {
			annotations: map[string]string{AnnotationPorts: "", "endpoint.aether.io/prots": "8080", AnnotationPort: "9000"},
			kinds:       []Kind{KindEmpty, KindUnknownAnnotation},
			text:        []string{`endpoint.aether.io/ports: "": the value is empty`, `did you mean "endpoint.aether.io/ports"?`},
		},
		"too many ports and an unknown protocol": {
			annotations: map[string]string{AnnotationPorts: portList(1, MaxPorts, ""), AnnotationProtocol: "sctp"},
			kinds:       []Kind{KindTooManyPorts, KindUnknownProtocol},
			text:        []string{`65 ports are declared`, `unknown protocol "sctp"`},
		},
		"18081 as primary and in ports": {
			annotations: map[string]string{AnnotationPort: "18081", AnnotationPorts: "18081=tcp,8080"},
			kinds:       []Kind{KindReservedPort, KindReservedPort}, token: "18081",
			full: `endpoint.aether.io/port: "18081": ` + reserved18081 + "\n" +
				`endpoint.aether.io/ports: "18081=tcp,8080": ` + reserved18081,
		},
		"a suffixed primary also listed with another protocol": {
			annotations: map[string]string{AnnotationPort: "9000=tcp", AnnotationPorts: "9000=h2"},
			kinds:       []Kind{KindSuffixOnPrimary}, token: "9000=tcp",
			text: []string{`the primary port takes no protocol suffix ("tcp")`},
		},
		"valid annotations do not rescue a bad one": {
			annotations: map[string]string{
				AnnotationPort: "9000", AnnotationPorts: "9000=tcp,9090=h2", AnnotationWeight: "10",
				AnnotationHealthCheckMode: "active", AnnotationUpstreams: "payments", AnnotationHealthPath: "/h z",
			},
			kinds: []Kind{KindInvalidHealthPath}, token: "/h z",
			text: []string{`health path "/h z"`},
		},
	}

	// ReservedPort: every reserved port, in endpoint.aether.io/port and in
	// endpoint.aether.io/ports with no suffix and with every suffix.
	why := map[int32]string{18081: reserved18081, 18082: reserved18082, 18001: reserved18001, 18008: reserved18008}
	for port, text := range why {
		n := fmt.Sprint(port)
		rows["reserved "+n+" as the primary"] = malformed{
			annotations: one(AnnotationPort, n), kinds: []Kind{KindReservedPort}, token: n,
			full: fmt.Sprintf("endpoint.aether.io/port: %q: %s", n, text),
		}
		for _, suffix := range []string{"", "h1", "h2", "http2", "grpc", "tcp"} {
			value := "8080," + n
			if suffix != "" {
				value += "=" + suffix
			}
			rows["reserved "+n+" in ports as "+cmp.Or(suffix, "unsuffixed")] = malformed{
				annotations: one(AnnotationPorts, value), kinds: []Kind{KindReservedPort}, token: n,
				full: fmt.Sprintf("endpoint.aether.io/ports: %q: %s", value, text),
			}
		}
	}
	return rows
}

// tokenMayBeEmpty reports whether e may have an empty Token: only when there is nothing to
// quote, that is an empty value or list element, an empty metadata key, or a count over a whole
// list.
func tokenMayBeEmpty(e *Error) bool {
	switch e.Kind {
	case KindEmpty, KindTooManyPorts, KindTooManyMetadata:
		return true
	case KindInvalidMetadataKey:
		return e.Annotation == AnnotationMetadataPrefix
	}
	return false
}

// malformedMinimum is the number of rows the table holds: a row removed by mistake fails
// TestMalformedCount (raise it when adding rows).
const malformedMinimum = 226

// TestMalformedCount holds the table to its size.
func TestMalformedCount(t *testing.T) {
	if n := len(malformedRows()); n < malformedMinimum {
		t.Errorf("%d malformed rows, want at least %d", n, malformedMinimum)
	} else {
		t.Logf("%d malformed rows", n)
	}
}

// TestMalformedCoversEveryKind: every Kind of errors.go is the first error of some row
// (KindMoreErrors, always last, the last of some row).
func TestMalformedCoversEveryKind(t *testing.T) {
	seen := map[Kind]bool{}
	for _, row := range malformedRows() {
		seen[row.kinds[0]] = true
		seen[row.kinds[len(row.kinds)-1]] = true // KindMoreErrors is always last
	}
	for _, k := range AllKinds() {
		if !seen[k] {
			t.Errorf("no row's first (or, for MoreErrors, last) error is %s", k)
		}
	}
}

func TestMalformed(t *testing.T) {
	for name, tt := range malformedRows() {
		t.Run(name, func(t *testing.T) {
			if len(tt.text) == 0 && tt.full == "" {
				t.Fatal("the row pins no error text")
			}
			spec, err := Parse(tt.annotations)
			if err == nil {
				t.Fatalf("Parse(%q) = %#v, want errors %v", tt.annotations, spec, tt.kinds)
			}
			// An error registers nothing.
			if !reflect.DeepEqual(spec, Spec{}) {
				t.Errorf("Parse returned %#v with its error, want the zero Spec", spec)
			}
			var list ErrorList
			if !errors.As(err, &list) {
				t.Fatalf("error %T is not an ErrorList", err)
			}
			if got := list.Kinds(); !slices.Equal(got, tt.kinds) {
				t.Errorf("kinds = %v, want %v\n%v", got, tt.kinds, err)
			}
			text := err.Error()
			if tt.full != "" && text != tt.full {
				t.Errorf("error text\n got %s\nwant %s", text, tt.full)
			}
			for _, s := range tt.text {
				if !strings.Contains(text, s) {
					t.Errorf("error text lacks %q:\n%s", s, text)
				}
			}
			if lines := strings.Count(text, "\n") + 1; lines != len(list) {
				t.Errorf("%d lines of error text for %d errors:\n%s", lines, len(list), text)
			}

			var first *Error
			if !errors.As(err, &first) {
				t.Fatal("errors.As finds no *Error")
			}
			if first != list[0] {
				t.Errorf("errors.As found %v, want the first error %v", first, list[0])
			}
			if first.Annotation == "" || first.Fix == "" {
				t.Errorf("first error has Annotation %q, Fix %q: want both set", first.Annotation, first.Fix)
			}
			if first.Token != tt.token {
				t.Errorf("first error's Token = %q, want %q", first.Token, tt.token)
			}
			checkErrorList(t, tt.annotations, list)

			// The same input gives the same errors, in the same order.
			if _, again := Parse(maps.Clone(tt.annotations)); again == nil || again.Error() != text {
				t.Errorf("second Parse gave\n%v\nwant\n%s", again, text)
			}
		})
	}
}

// checkErrorList fails t unless every error of l is complete (annotation, kind, detail and fix
// set; Value as written; Error() starting with the annotation) and l is sorted by annotation.
func checkErrorList(t *testing.T, annotations map[string]string, l ErrorList) {
	t.Helper()
	if len(l) == 0 {
		t.Fatal("empty ErrorList")
	}
	for i, e := range l {
		if e == nil {
			t.Fatalf("error %d is nil", i)
		}
		if e.Kind == KindMoreErrors {
			checkMoreErrors(t, i, l)
			continue
		}
		if e.Annotation == "" || e.Kind == "" || e.Detail == "" || e.Fix == "" {
			t.Errorf("error %d incomplete: %#v", i, e)
		}
		key, found := keyOf(annotations, e.Annotation)
		if !found {
			t.Errorf("error %d: annotation %q is not a key of the input", i, e.Annotation)
		}
		// Value is the value as written, or its first MaxQuoted bytes and "…".
		if want := excerpt(annotations[key], MaxQuoted); e.Value != want {
			t.Errorf("error %d: Value %q, want the annotation's value (cut) %q", i, e.Value, want)
		}
		if !strings.HasPrefix(e.Error(), e.Annotation+": ") {
			t.Errorf("error %d: %q does not start with its annotation %q", i, e.Error(), e.Annotation)
		}
		// The token is quoted from the value (or, for a key's error, from the key), cut like the
		// value, and is empty only when there is nothing to quote.
		quotedFrom := annotations[key]
		if e.Kind == KindUnknownAnnotation || e.Kind == KindInvalidMetadataKey {
			quotedFrom = key
		}
		if token := strings.TrimSuffix(e.Token, "…"); !strings.Contains(quotedFrom, token) || len(token) > MaxQuoted {
			t.Errorf("error %d: Token %q is not part of %q, or is longer than %d bytes", i, e.Token, excerpt(quotedFrom, 4*MaxQuoted), MaxQuoted)
		}
		if e.Token == "" && !tokenMayBeEmpty(e) {
			t.Errorf("error %d (%s) has an empty Token: %v", i, e.Kind, e)
		}
		if i > 0 && l[i-1].Annotation > e.Annotation {
			t.Errorf("errors not sorted by annotation: %q before %q", l[i-1].Annotation, e.Annotation)
		}
	}
	if text := l.Error(); len(text) > MaxErrorText {
		t.Errorf("error text is %d bytes, over MaxErrorText %d", len(text), MaxErrorText)
	}
}

// keyOf finds the key of annotations that an Error's Annotation names (cut to maxQuotedKey).
func keyOf(annotations map[string]string, annotation string) (string, bool) {
	if _, ok := annotations[annotation]; ok || annotation == AnnotationMetadataPrefix+"*" {
		return annotation, true
	}
	for key := range annotations {
		if excerpt(key, maxQuotedKey) == annotation {
			return key, true
		}
	}
	return "", false
}

// checkMoreErrors fails t unless l[i], a KindMoreErrors, is l's last entry, after at least one
// error, and counts a positive number of errors in its text.
func checkMoreErrors(t *testing.T, i int, l ErrorList) {
	t.Helper()
	e := l[i]
	if i != len(l)-1 || i == 0 || i > MaxErrors {
		t.Errorf("the MoreErrors entry is at %d of %d errors: want it last, after 1 to %d errors", i, len(l), MaxErrors)
	}
	if e.More < 1 || !strings.HasPrefix(e.Error(), fmt.Sprintf("and %d more error", e.More)) {
		t.Errorf("MoreErrors entry %#v: want a positive count, rendered first", e)
	}
}
