// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package portspec

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Kind classifies an Error, so callers (metrics, events, tests) can tell errors apart without
// reading their text.
type Kind string

const (
	// KindEmpty means an annotation, or one element of a list, is empty.
	KindEmpty Kind = "Empty"
	// KindTooLong means an annotation's value is longer than its cap (MaxLength). The value is
	// not parsed further, so no other error is reported for it.
	KindTooLong Kind = "TooLong"
	// KindNotAPort means a port is not a decimal number.
	KindNotAPort Kind = "NotAPort"
	// KindPortOutOfRange means a port is outside 1..65535.
	KindPortOutOfRange Kind = "PortOutOfRange"
	// KindReservedPort means a port is one of the mesh's own (18001, 18008, 18054, 18081, 18082).
	KindReservedPort Kind = "ReservedPort"
	// KindUnknownSuffix means a port's protocol suffix is not h1, h2, http2, grpc, tcp or udp.
	KindUnknownSuffix Kind = "UnknownSuffix"
	// KindSuffixOnPrimary means endpoint.aether.io/port carries a protocol suffix.
	KindSuffixOnPrimary Kind = "SuffixOnPrimary"
	// KindProtocolConflict means one port is declared twice with different protocols (UDP and
	// another included: one port number carries one transport).
	KindProtocolConflict Kind = "ProtocolConflict"
	// KindTooManyPorts means more ports than MaxPorts.
	KindTooManyPorts Kind = "TooManyPorts"
	// KindUnknownProtocol means endpoint.aether.io/protocol is not http, tcp or udp.
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
	// KindInvalidMetadataValue means a metadata value is longer than MaxMetadataValue.
	KindInvalidMetadataValue Kind = "InvalidMetadataValue"
	// KindTooManyMetadata means more metadata keys than MaxMetadata.
	KindTooManyMetadata Kind = "TooManyMetadata"
	// KindInvalidUpstream means an element of config.aether.io/upstreams is not a service name.
	KindInvalidUpstream Kind = "InvalidUpstream"
	// KindUnknownProxyless means aether.io/proxyless is not grpc.
	KindUnknownProxyless Kind = "UnknownProxyless"
	// KindInvalidIdentityGate means aether.io/identity-gate is neither "true" nor "false".
	KindInvalidIdentityGate Kind = "InvalidIdentityGate"
	// KindInvalidMeshDNS means aether.io/mesh-dns is neither "true" nor "false".
	KindInvalidMeshDNS Kind = "InvalidMeshDNS"
	// KindInvalidUDSSocket means endpoint.aether.io/uds-socket (or an EndpointPolicy's udsSocket)
	// is not <volume>/<socket-file>: not two segments, a ".." segment, an absolute path, or a
	// volume name that is not a DNS label.
	KindInvalidUDSSocket Kind = "InvalidUDSSocket"
	// KindInvalidUDSFile means the socket file name holds characters other than letters, digits,
	// '.', '_' and '-'.
	KindInvalidUDSFile Kind = "InvalidUDSFile"
	// KindUDSFileTooLong means the socket file name is longer than MaxUDSFile: its node path would
	// not fit a Unix socket address.
	KindUDSFileTooLong Kind = "UDSFileTooLong"
	// KindUnknownAnnotation means an endpoint.aether.io/ annotation this grammar does not define
	// (most often a typo, which would otherwise be silently ignored).
	KindUnknownAnnotation Kind = "UnknownAnnotation"
	// KindMoreErrors is never a fault of its own: it is the last entry of an ErrorList cut to
	// MaxErrors (or MaxErrorText), and counts the errors left out (Error.More).
	KindMoreErrors Kind = "MoreErrors"
)

// AllKinds lists every Kind, in declaration order, for callers that export a series per kind
// (a metric at zero before the first refusal) and for tests.
func AllKinds() []Kind {
	return []Kind{
		KindEmpty, KindTooLong, KindNotAPort, KindPortOutOfRange, KindReservedPort, KindUnknownSuffix,
		KindSuffixOnPrimary, KindProtocolConflict, KindTooManyPorts, KindUnknownProtocol, KindInvalidWeight,
		KindInvalidHealthPath, KindUnknownHealthCheckMode, KindInvalidMetadataKey, KindInvalidMetadataValue,
		KindTooManyMetadata, KindInvalidUpstream, KindUnknownProxyless, KindInvalidIdentityGate, KindInvalidMeshDNS,
		KindInvalidUDSSocket, KindInvalidUDSFile, KindUDSFileTooLong, KindUnknownAnnotation,
		KindMoreErrors,
	}
}

// Bounds of what errors carry and print. A hostile pod can write 256 KiB of annotations; none of
// it may be repeated per error, or N errors would cost N times the value (a denial of hundreds of
// megabytes through the API server, a webhook past its timeout).
const (
	// MaxQuoted is the most bytes of a value, token or quoted input an Error keeps; a longer one
	// is cut on a rune boundary and ends in "…".
	MaxQuoted = 64
	// MaxErrors is the most errors an ErrorList reports; the rest are counted in its last entry
	// (KindMoreErrors).
	MaxErrors = 10
	// MaxErrorText is the most bytes ErrorList.Error() renders, so an admission denial, an Event
	// or a condition quoting it stays small whatever the input.
	MaxErrorText = 3 * 1024

	// maxQuotedKey bounds Error.Annotation: Kubernetes' own limit of an annotation key (a 253-byte
	// prefix, a slash, a 63-byte name), so a key the API server accepts is never cut.
	maxQuotedKey = 253 + 1 + 63
	// moreLine is room kept under MaxErrorText for the final "and N more errors" line.
	moreLine = 128
)

// Error is one thing wrong with a pod's annotations.
type Error struct {
	// Annotation is the annotation's key (cut to Kubernetes' 317-byte limit of a key); empty for
	// KindMoreErrors.
	Annotation string
	// Value is the annotation's value as written, cut to MaxQuoted bytes and "…" when longer:
	// an Error never holds a whole large value.
	Value string
	// Token is the offending part of the value (the value itself for single-valued
	// annotations), cut like Value.
	Token string
	// Kind classifies the error.
	Kind Kind
	// Detail says what is wrong, naming the token.
	Detail string
	// Fix says what to write instead.
	Fix string
	// More is, for KindMoreErrors, how many errors were left out.
	More int
}

// Error renders the error as `<annotation>: "<value>": <detail> (<fix>)`, for example
// `endpoint.aether.io/ports: "9000=tpc": unknown protocol suffix "tpc" on port 9000 (want h1, h2,
// http2, grpc, tcp or udp; did you mean "tcp"?)`. A KindMoreErrors entry renders as
// `and <n> more errors (<fix>)`.
func (e *Error) Error() string {
	if e.Kind == KindMoreErrors {
		return fmt.Sprintf("%s (%s)", e.Detail, e.Fix)
	}
	return fmt.Sprintf("%s: %q: %s (%s)", e.Annotation, e.Value, e.Detail, e.Fix)
}

// ErrorList is every error found in one set of annotations, in a stable order: by annotation
// key, then by position in the value. Parse cuts it to at most MaxErrors errors and
// MaxErrorText bytes of text, always keeping the first; when it cuts, the last entry is a
// KindMoreErrors that counts the rest.
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

// Kinds lists the kinds in l, in order, for metrics and tests (KindMoreErrors last, when l was
// cut).
func (l ErrorList) Kinds() []Kind {
	kinds := make([]Kind, len(l))
	for i, e := range l {
		kinds[i] = e.Kind
	}
	return kinds
}

// bounded cuts l to MaxErrors errors and MaxErrorText bytes of text, keeping the first error
// whatever its size (it is bounded by MaxQuoted and maxQuotedKey), and counts what it dropped in
// a final KindMoreErrors entry.
func bounded(l ErrorList) ErrorList {
	size := 0
	for i, e := range l {
		size += len(e.Error()) + len("\n")
		if i == MaxErrors || (i > 0 && size > MaxErrorText-moreLine) {
			return append(l[:i:i], moreErrors(len(l)-i))
		}
	}
	return l
}

// moreErrors is the entry that stands for n errors left out of a list.
func moreErrors(n int) *Error {
	noun := "errors"
	if n == 1 {
		noun = "error"
	}
	return &Error{
		Kind: KindMoreErrors, More: n,
		Detail: fmt.Sprintf("and %d more %s", n, noun),
		Fix:    "fix the errors above and apply again to see the rest",
	}
}

// excerpt returns s when it holds at most limit bytes, else its longest prefix of at most limit
// bytes cut on a rune boundary, followed by "…". (internal/conditions.Truncate cuts messages the
// operator writes; portspec imports no implementation package of this module, only the API's
// types, and quotes input, not messages.)
func excerpt(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	keep := limit
	for keep > 0 && !utf8.RuneStart(s[keep]) {
		keep--
	}
	return s[:keep] + "…"
}
