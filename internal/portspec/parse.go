// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package portspec

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
)

// The annotations of the grammar (DESIGN section 3).
const (
	// AnnotationPort is the primary port: served and health-checked. Default 8080.
	AnnotationPort = "endpoint.aether.io/port"
	// AnnotationPorts is every port served, comma-separated, each optionally suffixed =h1, =h2,
	// =http2, =grpc, =tcp or =udp. The primary is always served, listed or not. =grpc is HTTP2
	// that speaks gRPC (Port.AppProtocol). A port number is declared with one protocol: 53=tcp
	// and 53=udp together are refused (see portToken).
	AnnotationPorts = "endpoint.aether.io/ports"
	// AnnotationProtocol is the protocol of ports with no suffix: http (default), tcp or udp.
	AnnotationProtocol = "endpoint.aether.io/protocol"
	// AnnotationWeight is the load-balancing weight, 1..65535. Default 1024.
	AnnotationWeight = "endpoint.aether.io/weight"
	// AnnotationHealthPath is the path probed on an HTTP primary. Default "/".
	AnnotationHealthPath = "endpoint.aether.io/health-path"
	// AnnotationHealthCheckMode is eds (default: the node agent probes) or active.
	AnnotationHealthCheckMode = "endpoint.aether.io/health-check-mode"
	// AnnotationMetadataPrefix prefixes endpoint metadata: metadata.endpoint.aether.io/<key>.
	AnnotationMetadataPrefix = "metadata.endpoint.aether.io/"
	// AnnotationUpstreams lists the services the pod calls, comma-separated.
	AnnotationUpstreams = "config.aether.io/upstreams"
	// AnnotationExcludeOutboundPorts lists destination ports whose outbound TCP the node's capture
	// leaves alone, comma-separated ("5432,6379"): the pod reaches them directly, not through
	// the mesh, in every capture mode.
	AnnotationExcludeOutboundPorts = "aether.io/exclude-outbound-ports"

	// LabelManaged is the label that opts a pod into the mesh, with the value ManagedValue only.
	LabelManaged = "aether.io/managed"
	// ManagedValue is the one value of LabelManaged that opts a pod in.
	ManagedValue = "true"

	// endpointPrefix is the namespace of the grammar's own keys: any other key under it is a typo.
	endpointPrefix = "endpoint.aether.io/"
)

// IsManaged reports whether labels opt a pod into the mesh: aether.io/managed is exactly "true".
// Any other value ("True", "yes", "1") leaves the pod out, as the webhook's and the agent's
// selectors do.
func IsManaged(labels map[string]string) bool { return labels[LabelManaged] == ManagedValue }

// NotManagedWarning tells the author of a pod labelled LabelManaged with value, not "true", that
// the pod is not in the mesh: the admission webhook's warning, and kubectl aether check's. (Label
// values are at most 63 bytes: the API server validates them before admission.)
func NotManagedWarning(value string) string {
	return fmt.Sprintf(`label %s is %q, not "true": this pod is NOT in the mesh and its mesh annotations are not checked; `+
		`write %s: "true" to put it in the mesh (only that exact value does), or remove the label`,
		LabelManaged, value, LabelManaged)
}

// IsGrammarKey reports whether Parse reads the annotation key: every key under
// endpoint.aether.io/ (an unknown one is an error) or metadata.endpoint.aether.io/, and
// config.aether.io/upstreams, aether.io/exclude-outbound-ports, aether.io/proxyless,
// aether.io/identity-gate and aether.io/mesh-dns. A change to any other annotation cannot change what Parse returns.
func IsGrammarKey(key string) bool {
	return key == AnnotationUpstreams || key == AnnotationExcludeOutboundPorts || key == AnnotationProxyless ||
		key == AnnotationIdentityGate || key == AnnotationMeshDNS ||
		strings.HasPrefix(key, endpointPrefix) || strings.HasPrefix(key, AnnotationMetadataPrefix)
}

// Defaults of the grammar.
const (
	DefaultPort            int32 = 8080
	DefaultWeight          int32 = 1024
	DefaultHealthPath            = "/"
	DefaultHealthCheckMode       = "eds"

	// MaxPorts is the most ports one pod may declare (the CRDs' limit too).
	MaxPorts = 64
	// MaxMetadata is the most metadata keys one pod may declare.
	MaxMetadata = 32
	// MaxMetadataValue is the longest metadata value, in bytes.
	MaxMetadataValue = 256
	// MaxHealthPath is the longest health path, in bytes.
	MaxHealthPath = 1024

	// MaxPortsLength caps endpoint.aether.io/ports, in bytes: MaxPorts elements of the longest
	// form ("65535=http2", 11 bytes) with ", " between them take 830 bytes; the cap leaves room
	// for generous spacing.
	MaxPortsLength = 4096
	// MaxUpstreamsLength caps config.aether.io/upstreams, in bytes: about 300 services of a
	// typical "name.namespace" length.
	MaxUpstreamsLength = 8192
	// MaxShortValue caps the single-valued annotations (port, protocol, weight,
	// health-check-mode, proxyless, identity-gate), in bytes: their longest valid value is 6 bytes.
	MaxShortValue = 64
)

// MaxLength maps each annotation of the grammar to the cap of its value's length, in bytes. A
// longer value is refused (KindTooLong) without being parsed, so parsing costs a few KiB per pod
// whatever the pod carries. Metadata values have their own cap, MaxMetadataValue.
var MaxLength = map[string]int{
	AnnotationPort:            MaxShortValue,
	AnnotationPorts:           MaxPortsLength,
	AnnotationProtocol:        MaxShortValue,
	AnnotationWeight:          MaxShortValue,
	AnnotationHealthPath:      MaxHealthPath,
	AnnotationHealthCheckMode: MaxShortValue,
	AnnotationUpstreams:       MaxUpstreamsLength,
	// MaxPorts ports of five digits, comma-separated, with room for spacing.
	AnnotationExcludeOutboundPorts: MaxPortsLength,
	AnnotationProxyless:            MaxShortValue,
	AnnotationIdentityGate:         MaxShortValue,
	AnnotationMeshDNS:              MaxShortValue,
	AnnotationUDSSocket:            MaxUDSSocketLength,
}

// Reserved maps each port the mesh keeps for itself to why. A workload can declare none of them,
// with any protocol.
var Reserved = map[int32]string{
	meshv1alpha1.MeshHTTPPort:     "it is the mesh's HTTP proxy port, where the Host header decides the destination; it is not a port of any service",
	meshv1alpha1.MeshTCPPort:      "it is the mesh's TCP port, which reaches a service's default TCP port; it is not a port of any service",
	meshv1alpha1.ProxyCapturePort: "the mesh proxy receives captured outbound traffic on it inside every pod",
	meshv1alpha1.ProxyInboundPort: "the mesh proxy receives inbound mTLS traffic on it inside every pod",
	meshv1alpha1.MeshDNSPort:      "the mesh DNS answers the pod's DNS queries on it inside every pod",
}

// suffixes maps each protocol suffix of endpoint.aether.io/ports to its protocol.
var suffixes = map[string]meshv1alpha1.Protocol{
	"h1": meshv1alpha1.ProtocolHTTP, "h2": meshv1alpha1.ProtocolHTTP2, "http2": meshv1alpha1.ProtocolHTTP2,
	"grpc": meshv1alpha1.ProtocolHTTP2, "tcp": meshv1alpha1.ProtocolTCP, "udp": meshv1alpha1.ProtocolUDP,
}

const suffixWant = "want h1, h2, http2, grpc, tcp or udp"

// suffixHints names the suffix meant by spellings that edit distance would map wrongly (http1 is
// one edit from http2, but means h1). An empty hint means none fits: the spelling is a protocol
// the mesh does not carry as such, and noCarry says why.
var suffixHints = map[string]string{
	"http": "h1", "http1": "h1", "http/1.1": "h1", "h1c": "h1", "h2c": "h2", "https": "tcp", "tls": "tcp",
	"dns": "udp", "dtls": "udp", "h3": "", "http3": "", "quic": "",
}

// noCarry says why HTTP/3 (h3, http3, quic) is refused: the mesh routes no HTTP/3 request, and
// what it can do instead.
const noCarry = "; the mesh does not route HTTP/3: declare the port =udp to carry its QUIC datagrams " +
	"as plain UDP (unrouted: no Host, no HTTP routes), or serve HTTP/1.1 or HTTP/2 on it (=h1, =h2)"

// suffixHint suggests the suffix a misspelled one most likely meant.
func suffixHint(suffix string) string {
	if hint, known := suffixHints[strings.ToLower(suffix)]; known {
		if hint == "" {
			return noCarry
		}
		return fmt.Sprintf("; did you mean %q?", hint)
	}
	return didYouMean(suffix, slices.Sorted(maps.Keys(suffixes)))
}

// knownEndpointKeys are the grammar's keys under endpoint.aether.io/.
var knownEndpointKeys = []string{
	AnnotationPort, AnnotationPorts, AnnotationProtocol,
	AnnotationWeight, AnnotationHealthPath, AnnotationHealthCheckMode, AnnotationUDSSocket,
}

var (
	dnsLabel        = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)
	healthPath      = regexp.MustCompile(`^/[!-~]*$`)
	reservedMetaKey = []string{"ip", "pod", "cluster", "namespace"}
)

// HealthCheck is how an endpoint's health is established.
type HealthCheck struct {
	// Mode is "eds" (the node agent probes) or "active" (the client proxies probe too).
	Mode string `json:"mode"`
	// Path is the HTTP path probed on an HTTP primary.
	Path string `json:"path"`
}

// Spec is everything a pod's annotations say about its place in the mesh.
type Spec struct {
	PortSet `json:",inline"`
	// Weight is the load-balancing weight.
	Weight int32 `json:"weight"`
	// HealthCheck is how health is established.
	HealthCheck HealthCheck `json:"healthCheck"`
	// Metadata is endpoint metadata for subset routing; nil when none.
	Metadata map[string]string `json:"metadata,omitempty"`
	// Upstreams are the services the pod calls, sorted, each once; nil when none.
	Upstreams []string `json:"upstreams,omitempty"`
	// ExcludeOutboundPorts are the destination ports capture leaves alone, ascending, each once;
	// nil when none.
	ExcludeOutboundPorts []int32 `json:"excludeOutboundPorts,omitempty"`
	// Proxyless is ProxylessGRPC when the pod's gRPC clients speak xDS (AnnotationProxyless);
	// empty otherwise.
	Proxyless string `json:"proxyless,omitempty"`
	// NoIdentityGate is true when the pod opts out of the identity gate (AnnotationIdentityGate
	// "false"); false, the default, keeps it.
	NoIdentityGate bool `json:"noIdentityGate,omitempty"`
	// NoMeshDNS is true when the pod opts out of the mesh DNS (AnnotationMeshDNS "false");
	// false, the default, keeps it.
	NoMeshDNS bool `json:"noMeshDNS,omitempty"`
	// UDSSocket is where the pod serves when it serves on a Unix socket (AnnotationUDSSocket);
	// nil when it serves on its TCP ports.
	UDSSocket *UDSSocket `json:"udsSocket,omitempty"`
}

// Parse reads a pod's annotations. Annotations outside the grammar (IsGrammarKey) are ignored.
// On any error it returns an ErrorList of the errors found (the first MaxErrors, then a count of
// the rest), and a zero Spec: a pod whose annotations do not parse registers nothing.
//
// Its cost is linear in the size of the annotations: every value is capped (MaxLength) before it
// is read, and every error quotes at most MaxQuoted bytes of it.
func Parse(annotations map[string]string) (Spec, error) {
	p := parser{annotations: annotations}
	spec := Spec{
		Weight:      p.weight(),
		HealthCheck: HealthCheck{Mode: p.healthCheckMode(), Path: p.healthPath()},
		Metadata:    p.metadata(),
		Upstreams:   p.upstreams(),

		ExcludeOutboundPorts: p.excludeOutboundPorts(),
		Proxyless:            p.proxyless(),
		NoIdentityGate:       p.identityGateOff(),
		NoMeshDNS:            p.meshDNSOff(),
		UDSSocket:            p.udsSocketAnnotation(),
	}
	spec.PortSet = p.portSet()
	p.udpOverSocket(spec)
	p.unknownKeys()
	if len(p.errs) > 0 {
		slices.SortStableFunc(p.errs, func(a, b *Error) int { return strings.Compare(a.Annotation, b.Annotation) })
		return Spec{}, bounded(p.errs)
	}
	return spec, nil
}

// parser collects errors while reading one set of annotations.
type parser struct {
	annotations map[string]string
	errs        ErrorList
}

// ownWords is text of the grammar's own (an explanation), passed to fail uncut.
type ownWords string

// fail records an error. Every piece of input it keeps or prints — the key, the value, the token
// and each string argument of detail — is cut (excerpt), so an error costs at most a few hundred
// bytes whatever the input's size. The grammar's own text is passed as ownWords, and kept whole.
func (p *parser) fail(key, token string, kind Kind, fix, detail string, args ...any) {
	for i, arg := range args {
		if s, ok := arg.(string); ok {
			args[i] = excerpt(s, MaxQuoted)
		}
	}
	p.errs = append(p.errs, &Error{
		Annotation: excerpt(key, maxQuotedKey), Value: excerpt(p.annotations[key], MaxQuoted), Token: excerpt(token, MaxQuoted),
		Kind: kind, Detail: fmt.Sprintf(detail, args...), Fix: fix,
	})
}

// lookup returns an annotation's value and whether it is set and readable. A set but empty
// value, or one longer than its cap (MaxLength), is an error; the latter is not read further.
func (p *parser) lookup(key, fix string) (string, bool) {
	v, ok := p.annotations[key]
	if !ok {
		return "", false
	}
	if limit, capped := MaxLength[key]; capped && len(v) > limit {
		p.fail(key, v, KindTooLong, fmt.Sprintf("shorten it to at most %d bytes: %s", limit, fix),
			"the value is %d bytes long, over the cap of %d bytes, and is not parsed", len(v), limit)
		return "", false
	}
	if strings.TrimSpace(v) == "" {
		p.fail(key, v, KindEmpty, fix, "the value is empty")
		return "", false
	}
	return strings.TrimSpace(v), true
}

// inRange is token, all digits, as a port number, or fails it as PortOutOfRange outside
// 1..65535 (the one range rule of every port the grammar reads).
func (p *parser) inRange(key, token, fix string) (int32, bool) {
	n, err := strconv.ParseUint(token, 10, 32)
	if err != nil || n < 1 || n > 65535 {
		p.fail(key, token, KindPortOutOfRange, fix, "port %s is outside 1..65535", token)
		return 0, false
	}
	return int32(n), true
}

// port parses one port number token (no suffix) of annotation key, from element (the token with
// its suffix, which names the error when the number is missing); ok is false after an error.
func (p *parser) port(key, element, token string) (int32, bool) {
	const fix = "write a port number from 1 to 65535, for example 8080"
	if token == "" {
		p.fail(key, element, KindNotAPort, fix, "a port number is missing in %q", element)
		return 0, false
	}
	if strings.Trim(token, "0123456789") != "" {
		p.fail(key, token, KindNotAPort, fix, "%q is not a port number", token)
		return 0, false
	}
	port, ok := p.inRange(key, token, fix)
	if !ok {
		return 0, false
	}
	if why, reserved := Reserved[port]; reserved {
		p.fail(key, token, KindReservedPort,
			"serve the application on another port, for example 8080, and declare that one",
			"port %d is reserved: %s", port, ownWords(why))
		return 0, false
	}
	return port, true
}

// defaultProtocol reads endpoint.aether.io/protocol: the protocol of ports with no suffix.
func (p *parser) defaultProtocol() meshv1alpha1.Protocol {
	const fix = "want http, tcp or udp"
	v, ok := p.lookup(AnnotationProtocol, fix)
	if !ok {
		return meshv1alpha1.ProtocolHTTP
	}
	switch v {
	case "http":
		return meshv1alpha1.ProtocolHTTP
	case "tcp":
		return meshv1alpha1.ProtocolTCP
	case "udp":
		return meshv1alpha1.ProtocolUDP
	}
	p.fail(AnnotationProtocol, v, KindUnknownProtocol, fix+didYouMean(v, []string{"http", "tcp", "udp"}),
		"unknown protocol %q", v)
	return meshv1alpha1.ProtocolHTTP
}

func (p *parser) portSet() PortSet {
	defaultProto := p.defaultProtocol()
	primary := p.primary()

	declared := map[int32]Port{}
	if v, ok := p.lookup(AnnotationPorts, `list the ports served, for example "8080,9090=h2,9000=tcp"`); ok {
		for token := range strings.SplitSeq(v, ",") {
			p.portToken(strings.TrimSpace(token), defaultProto, declared)
		}
	}
	if _, listed := declared[primary]; !listed && primary != 0 {
		declared[primary] = Port{Port: primary, Protocol: defaultProto}
	}
	if len(declared) > MaxPorts {
		p.fail(AnnotationPorts, "", KindTooManyPorts, "split the workload, or declare only the ports clients dial",
			"%d ports are declared; at most %d are allowed", len(declared), MaxPorts)
	}

	ports := make([]Port, 0, len(declared))
	for _, n := range slices.Sorted(maps.Keys(declared)) {
		ports = append(ports, declared[n])
	}
	return PortSet{Primary: primary, Ports: ports}
}

// udpOverSocket refuses a UDP port on a pod that serves on a Unix socket: the node proxy delivers
// every port of such a pod to its one stream socket, where datagrams have nowhere to go.
func (p *parser) udpOverSocket(spec Spec) {
	if spec.UDSSocket == nil {
		return
	}
	for _, port := range spec.Ports {
		if port.Protocol.IsUDP() {
			p.fail(AnnotationUDSSocket, p.annotations[AnnotationUDSSocket], KindProtocolConflict,
				fmt.Sprintf("serve port %d's UDP on the pod's network (remove %s), or declare no udp port", port.Port, AnnotationUDSSocket),
				"the pod serves on a Unix stream socket, and port %d is declared udp: the socket takes no datagrams", port.Port)
			return
		}
	}
}

// primary reads endpoint.aether.io/port; 0 after an error.
func (p *parser) primary() int32 {
	v, ok := p.lookup(AnnotationPort, "write a port number from 1 to 65535, for example 8080")
	if !ok {
		if _, set := p.annotations[AnnotationPort]; set {
			return 0
		}
		return DefaultPort
	}
	number, suffix, hasSuffix := strings.Cut(v, "=")
	port, ok := p.port(AnnotationPort, v, strings.TrimSpace(number))
	if !ok {
		return 0
	}
	if hasSuffix {
		example := strconv.Itoa(int(port)) + "=tcp"
		if _, known := suffixes[strings.TrimSpace(suffix)]; known {
			example = strconv.Itoa(int(port)) + "=" + strings.TrimSpace(suffix)
		}
		p.fail(AnnotationPort, v, KindSuffixOnPrimary,
			fmt.Sprintf("write %q here and declare its protocol in %s, for example %q", strconv.Itoa(int(port)), AnnotationPorts, example),
			"the primary port takes no protocol suffix (%q)", suffix)
		return 0
	}
	return port
}

// portToken parses one element of endpoint.aether.io/ports into declared. A port declared both
// =grpc and =h2 (or =http2) is one HTTP2 port that speaks gRPC, whatever the order: =grpc says
// more about it, not something else.
//
// A port number declared both UDP and another protocol (53=tcp and 53=udp, as DNS serves) is
// refused like any other conflict: the port number is a port's key everywhere the mesh names it
// (the MeshService's status.ports, the dial surface's <name>:<p>, the SNI of a hop, a route's
// backend port, the generated Service's port name), so one number carries one transport. The
// error says so and how to serve the other transport.
func (p *parser) portToken(token string, defaultProto meshv1alpha1.Protocol, declared map[int32]Port) {
	if token == "" {
		p.fail(AnnotationPorts, token, KindEmpty, `remove the extra comma: ports are separated by single commas, for example "8080,9000=tcp"`,
			"an element of the list is empty")
		return
	}
	number, suffix, hasSuffix := strings.Cut(token, "=")
	port, ok := p.port(AnnotationPorts, token, strings.TrimSpace(number))
	if !ok {
		return
	}
	proto, app := defaultProto, meshv1alpha1.AppProtocol("")
	if hasSuffix {
		suffix = strings.TrimSpace(suffix)
		var known bool
		if proto, known = suffixes[suffix]; !known {
			if suffix == "" {
				p.fail(AnnotationPorts, token, KindUnknownSuffix, suffixWant+", or drop the =",
					"port %d has an empty protocol suffix", port)
			} else {
				p.fail(AnnotationPorts, token, KindUnknownSuffix, suffixWant+suffixHint(suffix),
					"unknown protocol suffix %q on port %d", suffix, port)
			}
			return
		}
		if suffix == string(meshv1alpha1.AppProtocolGRPC) {
			app = meshv1alpha1.AppProtocolGRPC
		}
	}
	prev, seen := declared[port]
	if seen && prev.Protocol != proto {
		if prev.Protocol.IsUDP() || proto.IsUDP() {
			p.fail(AnnotationPorts, token, KindProtocolConflict,
				fmt.Sprintf("declare port %d with one protocol; serve the other transport on another port and declare that one, for example %q",
					port, fmt.Sprintf("%d=udp,%d=tcp", port, otherPort(port))),
				"port %d is declared twice, as %s and as %s: a port number carries one transport in the mesh", port, prev.Protocol, proto)
			return
		}
		p.fail(AnnotationPorts, token, KindProtocolConflict, "declare each port once, with one protocol",
			"port %d is declared twice, as %s and as %s", port, prev.Protocol, proto)
		return
	}
	if seen && app == "" {
		app = prev.AppProtocol
	}
	declared[port] = Port{Port: port, Protocol: proto, AppProtocol: app}
}

func (p *parser) weight() int32 {
	const fix = "write a number from 1 to 65535; the default is 1024"
	v, ok := p.lookup(AnnotationWeight, fix)
	if !ok {
		return DefaultWeight
	}
	n, err := strconv.ParseUint(v, 10, 32)
	if err != nil || strings.Trim(v, "0123456789") != "" || n < 1 || n > 65535 {
		p.fail(AnnotationWeight, v, KindInvalidWeight, fix, "weight %q is not a number from 1 to 65535", v)
		return DefaultWeight
	}
	return int32(n)
}

func (p *parser) healthPath() string {
	const fix = `write an absolute path without spaces, for example "/healthz"`
	v, ok := p.lookup(AnnotationHealthPath, fix)
	if !ok {
		return DefaultHealthPath
	}
	if !healthPath.MatchString(v) { // its length is capped by lookup
		p.fail(AnnotationHealthPath, v, KindInvalidHealthPath, fix,
			"health path %q must start with / and hold at most %d printable characters without spaces", v, MaxHealthPath)
		return DefaultHealthPath
	}
	return v
}

func (p *parser) healthCheckMode() string {
	const fix = "want eds (the node agent probes) or active (every client proxy probes)"
	v, ok := p.lookup(AnnotationHealthCheckMode, fix)
	if !ok {
		return DefaultHealthCheckMode
	}
	if v != "eds" && v != "active" {
		p.fail(AnnotationHealthCheckMode, v, KindUnknownHealthCheckMode, fix+didYouMean(v, []string{"active", "eds"}),
			"unknown health-check mode %q", v)
		return DefaultHealthCheckMode
	}
	return v
}

// ReservedMetadataKey reports whether key is one of the mesh's own routing keys (ip, pod, cluster,
// namespace), which no endpoint may publish as metadata.
func ReservedMetadataKey(key string) bool { return slices.Contains(reservedMetaKey, key) }

func (p *parser) metadata() map[string]string {
	var meta map[string]string
	for _, key := range p.keys(func(key string) bool { return strings.HasPrefix(key, AnnotationMetadataPrefix) }) {
		name := strings.TrimPrefix(key, AnnotationMetadataPrefix)
		value := p.annotations[key]
		switch {
		case !dnsLabel.MatchString(name):
			p.fail(key, name, KindInvalidMetadataKey, "use lowercase letters, digits and '-', at most 63, starting and ending with a letter or digit",
				"metadata key %q is not a DNS label", name)
		case ReservedMetadataKey(name):
			p.fail(key, name, KindInvalidMetadataKey, "choose another key: ip, pod, cluster and namespace are the mesh's own routing keys",
				"metadata key %q is reserved", name)
		case len(value) > MaxMetadataValue:
			p.fail(key, value, KindInvalidMetadataValue, fmt.Sprintf("shorten it to at most %d bytes", MaxMetadataValue),
				"metadata value is %d bytes long", len(value))
		default:
			if meta == nil {
				meta = map[string]string{}
			}
			meta[name] = value
		}
	}
	if len(meta) > MaxMetadata {
		p.fail(AnnotationMetadataPrefix+"*", "", KindTooManyMetadata, "keep only the keys clients route on",
			"%d metadata keys are declared; at most %d are allowed", len(meta), MaxMetadata)
	}
	return meta
}

func (p *parser) upstreams() []string {
	const fix = `list services as <name> or <name>.<namespace>, comma-separated, for example "payments,ledger.finance"`
	v, ok := p.lookup(AnnotationUpstreams, fix)
	if !ok {
		return nil
	}
	var out []string
	for token := range strings.SplitSeq(v, ",") {
		token = strings.TrimSpace(token)
		name, namespace, qualified := strings.Cut(token, ".")
		switch {
		case token == "":
			p.fail(AnnotationUpstreams, token, KindEmpty, fix, "an element of the list is empty")
		case !dnsLabel.MatchString(name) || (qualified && !dnsLabel.MatchString(namespace)):
			p.fail(AnnotationUpstreams, token, KindInvalidUpstream, fix, "%q is not a service name", token)
		default:
			out = append(out, token)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// excludeOutboundPorts reads aether.io/exclude-outbound-ports: at most MaxPorts ports, none of
// the mesh's own (Reserved): 18081 and 18082 are how the pod reaches the mesh, and capture leaves
// 18001 and 18008 alone already.
func (p *parser) excludeOutboundPorts() []int32 {
	v, ok := p.lookup(AnnotationExcludeOutboundPorts, `list destination ports the pod reaches directly, comma-separated, for example "5432,6379"`)
	if !ok {
		return nil
	}
	var out []int32
	for token := range strings.SplitSeq(v, ",") {
		if port, ok := p.excludedPort(strings.TrimSpace(token)); ok {
			out = append(out, port)
		}
	}
	slices.Sort(out)
	out = slices.Compact(out)
	if len(out) > MaxPorts {
		p.fail(AnnotationExcludeOutboundPorts, "", KindTooManyPorts, "exclude only the ports the pod must reach directly",
			"%d ports are excluded; at most %d are allowed", len(out), MaxPorts)
	}
	return out
}

// excludedPort reads one element of aether.io/exclude-outbound-ports; ok is false after an error.
func (p *parser) excludedPort(token string) (int32, bool) {
	const (
		key = AnnotationExcludeOutboundPorts
		fix = "write a destination port number from 1 to 65535, for example 5432"
	)
	switch {
	case token == "":
		p.fail(key, token, KindEmpty, `remove the extra comma: ports are separated by single commas, for example "5432,6379"`,
			"an element of the list is empty")
		return 0, false
	case strings.Trim(token, "0123456789") != "":
		p.fail(key, token, KindNotAPort, fix, "%q is not a port number (one port per element, no ranges)", token)
		return 0, false
	}
	port, ok := p.inRange(key, token, fix)
	if !ok {
		return 0, false
	}
	switch port {
	case meshv1alpha1.MeshHTTPPort, meshv1alpha1.MeshTCPPort:
		p.fail(key, token, KindReservedPort, fmt.Sprintf("remove %d: excluding it would take the pod's calls into the mesh out of the mesh", port),
			"port %d is the mesh's own: %s", port, ownWords(Reserved[port]))
		return 0, false
	case meshv1alpha1.ProxyCapturePort, meshv1alpha1.ProxyInboundPort:
		p.fail(key, token, KindReservedPort, fmt.Sprintf("remove %d: capture never takes the mesh proxy's own ports", port),
			"port %d is the mesh proxy's own: %s", port, ownWords(Reserved[port]))
		return 0, false
	case meshv1alpha1.MeshDNSPort:
		p.fail(key, token, KindReservedPort, fmt.Sprintf("remove %d; to leave the pod's DNS alone, set %s: %q", port, AnnotationMeshDNS, MeshDNSOff),
			"port %d is the mesh's own: %s", port, ownWords(Reserved[port]))
		return 0, false
	}
	return port, true
}

// keys returns the annotation keys for which match holds, sorted (sorting only those keeps a pod
// with many unrelated annotations cheap).
func (p *parser) keys(match func(string) bool) []string {
	var keys []string
	for key := range p.annotations {
		if match(key) {
			keys = append(keys, key)
		}
	}
	slices.Sort(keys)
	return keys
}

// unknownKeys reports every endpoint.aether.io/ key the grammar does not define.
func (p *parser) unknownKeys() {
	unknown := func(key string) bool {
		return strings.HasPrefix(key, endpointPrefix) && !slices.Contains(knownEndpointKeys, key)
	}
	for _, key := range p.keys(unknown) {
		p.fail(key, key, KindUnknownAnnotation,
			"the endpoint.aether.io/ annotations are port, ports, protocol, weight, health-path, health-check-mode and uds-socket"+
				unknownKeyHint(key),
			"unknown annotation %q", key)
	}
}

// unknownKeyHint suggests the annotation an unknown endpoint.aether.io/ key most likely meant,
// including the one grammar key that lives under another prefix (config.aether.io/upstreams).
func unknownKeyHint(key string) string {
	if editDistance(strings.TrimPrefix(key, endpointPrefix), "upstreams") < 3 {
		return fmt.Sprintf("; did you mean %q?", AnnotationUpstreams)
	}
	return didYouMean(key, knownEndpointKeys)
}

// typoDistance is the most edits a typo is taken to be: "tpc" for "tcp", "endpoints" for
// "endpoint".
const typoDistance = 2

// didYouMean suggests the candidate closest to s, when one is close enough to be a typo.
func didYouMean(s string, candidates []string) string {
	if best := closest(strings.ToLower(excerpt(s, maxDistanceInput+1)), candidates); best != "" {
		return fmt.Sprintf("; did you mean %q?", best)
	}
	return ""
}

// closest returns the candidate nearest to s within typoDistance edits ("" when none is), the
// first one on a tie.
func closest(s string, candidates []string) string {
	best, bestDist := "", typoDistance+1
	for _, c := range candidates {
		if d := editDistance(s, c); d < bestDist {
			best, bestDist = c, d
		}
	}
	return best
}

// maxDistanceInput is the longest string editDistance measures: longer ones are no typo of any
// name of the grammar, whose longest is 36 bytes.
const maxDistanceInput = 64

// far is what editDistance reports for strings more than typoDistance edits apart.
const far = maxDistanceInput

// editDistance is the optimal-string-alignment distance — insertions, deletions, substitutions
// and transpositions of adjacent characters each cost 1 ("tpc" is one step from "tcp") — when it
// is at most typoDistance; otherwise it is far. Only that much is ever asked (is this a typo?),
// so only the band of the matrix within typoDistance of its diagonal is computed, rows stop as
// soon as every cell of one exceeds typoDistance, and strings longer than maxDistanceInput or
// whose lengths differ by more than typoDistance are not compared at all. It allocates nothing:
// checking every key of a pod with thousands of annotations stays cheap.
func editDistance(a, b string) int {
	const k = typoDistance
	if len(a) > maxDistanceInput || len(b) > maxDistanceInput || max(len(a)-len(b), len(b)-len(a)) > k {
		return far
	}
	// A common prefix and suffix cost nothing (a transposition never spans them, since their
	// characters already match).
	for len(a) > 0 && len(b) > 0 && a[0] == b[0] {
		a, b = a[1:], b[1:]
	}
	for len(a) > 0 && len(b) > 0 && a[len(a)-1] == b[len(b)-1] {
		a, b = a[:len(a)-1], b[:len(b)-1]
	}
	// Three rolling rows: the transposition step reads two rows back. A cell just outside the
	// band is set to far before a row reads it; cells further out are never read.
	var rows [3][maxDistanceInput + 2]uint8
	prev2, prev, cur := &rows[0], &rows[1], &rows[2]
	for j := 0; j <= min(len(b), k); j++ {
		prev[j] = uint8(j)
	}
	prev[min(len(b), k)+1] = far
	for i := 1; i <= len(a); i++ {
		lo, hi := max(1, i-k), min(len(b), i+k)
		cur[lo-1] = far
		if lo == 1 && i <= k {
			cur[0] = uint8(i)
		}
		rowMin := cur[lo-1]
		for j := lo; j <= hi; j++ {
			var cost uint8 = 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cell := min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cell = min(cell, prev2[j-2]+1)
			}
			cur[j] = cell
			rowMin = min(rowMin, cell)
		}
		if rowMin > k {
			return far // every alignment already costs more than a typo
		}
		cur[hi+1] = far
		prev2, prev, cur = prev, cur, prev2
	}
	if d := int(prev[len(b)]); d <= k {
		return d
	}
	return far
}

// otherPort is a port to suggest for the second transport of port n: n+1, or n-1 at the top of
// the range, stepping past the mesh's own ports.
func otherPort(n int32) int32 {
	step := int32(1)
	if n == 65535 {
		step = -1
	}
	for m := n + step; ; m += step {
		if _, reserved := Reserved[m]; !reserved {
			return m
		}
	}
}
