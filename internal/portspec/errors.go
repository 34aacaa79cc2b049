// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package portspec

import (
	"fmt"
	"strings"
)

// Kind classifies an Error, so callers (metrics, events, tests) can tell errors apart without
// reading their text.
type Kind string

const (
	// KindEmpty means an annotation, or one element of a list, is empty.
	KindEmpty Kind = "Empty"
	// KindNotAPort means a port is not a decimal number.
	KindNotAPort Kind = "NotAPort"
	// KindPortOutOfRange means a port is outside 1..65535.
	KindPortOutOfRange Kind = "PortOutOfRange"
	// KindReservedPort means a port is one of the mesh's own (18001, 18008, 18081, 18082).
	KindReservedPort Kind = "ReservedPort"
	// KindUnknownSuffix means a port's protocol suffix is not h1, h2, http2, grpc or tcp.
	KindUnknownSuffix Kind = "UnknownSuffix"
	// KindSuffixOnPrimary means endpoint.aether.io/port carries a protocol suffix.
	KindSuffixOnPrimary Kind = "SuffixOnPrimary"
	// KindProtocolConflict means one port is declared twice with different protocols.
	KindProtocolConflict Kind = "ProtocolConflict"
	// KindTooManyPorts means more ports than MaxPorts.
	KindTooManyPorts Kind = "TooManyPorts"
	// KindUnknownProtocol means endpoint.aether.io/protocol is not http or tcp.
	KindUnknownProtocol Kind = "UnknownProtocol"
	// KindInvalidWeight means endpoint.aether.io/weight is not a number in 1..65535.
	KindInvalidWeight Kind = "InvalidWeight"
	// KindInvalidHealthPath means endpoint.aether.io/health-path is not an absolute path.
	KindInvalidHealthPath Kind = "InvalidHealthPath"
	// KindUnknownHealthCheckMode means endpoint.aether.io/health-check-mode is not eds or active.
	KindUnknownHealthCheckMode Kind = "UnknownHealthCheckMode"
	// KindInvalidMetadataKey means a metadata.endpoint.aether.io/<key> key is not a DNS label, or is
	// reserved.
	KindInvalidMetadataKey Kind = "InvalidMetadataKey"
	// KindInvalidMetadataValue means a metadata value is too long.
	KindInvalidMetadataValue Kind = "InvalidMetadataValue"
	// KindTooManyMetadata means more metadata keys than MaxMetadata.
	KindTooManyMetadata Kind = "TooManyMetadata"
	// KindInvalidUpstream means an element of config.aether.io/upstreams is not a service name.
	KindInvalidUpstream Kind = "InvalidUpstream"
	// KindUnknownAnnotation means an endpoint.aether.io/ annotation this grammar does not define
	// (most often a typo, which would otherwise be silently ignored).
	KindUnknownAnnotation Kind = "UnknownAnnotation"
)

// Error is one thing wrong with a pod's annotations.
type Error struct {
	// Annotation is the annotation's key.
	Annotation string
	// Value is the annotation's whole value, as written.
	Value string
	// Token is the offending part of Value (the whole value for single-valued annotations).
	Token string
	// Kind classifies the error.
	Kind Kind
	// Detail says what is wrong, naming the token.
	Detail string
	// Fix says what to write instead.
	Fix string
}

// Error renders the error as `<annotation>: "<value>": <detail> (<fix>)`, for example
// `endpoint.aether.io/ports: "9000=tpc": unknown protocol suffix "tpc" on port 9000 (want h1, h2,
// http2, grpc or tcp; did you mean "tcp"?)`.
func (e *Error) Error() string {
	return fmt.Sprintf("%s: %q: %s (%s)", e.Annotation, e.Value, e.Detail, e.Fix)
}

// ErrorList is every error found in one set of annotations, in a stable order: by annotation
// key, then by position in the value.
type ErrorList []*Error

// Error renders one error per line.
func (l ErrorList) Error() string {
	lines := make([]string, len(l))
	for i, e := range l {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap lets errors.As find each *Error.
func (l ErrorList) Unwrap() []error {
	errs := make([]error, len(l))
	for i, e := range l {
		errs[i] = e
	}
	return errs
}

// Kinds lists the kinds in l, in order, for metrics and tests.
func (l ErrorList) Kinds() []Kind {
	kinds := make([]Kind, len(l))
	for i, e := range l {
		kinds[i] = e.Kind
	}
	return kinds
}
