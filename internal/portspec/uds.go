// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package portspec

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// AnnotationUDSSocket makes the node's proxy deliver the pod's inbound requests to a Unix socket
// instead of its TCP ports: <volume>/<socket-file>, the name of the pod's csi.aether.io volume
// (not its mount path) and a file directly inside it. The pod's ports still name what clients
// dial; every declared port is delivered to the one socket. It overrides an EndpointPolicy's
// udsSocket on the pod's service.
const AnnotationUDSSocket = "endpoint.aether.io/uds-socket"

// The socket's place on the node. The csi.aether.io plugin mounts one tmpfs per pod at
// UDSHostRoot/<pod UID>; the proxy dials UDSHostRoot/<pod UID>/<file>, which must fit an AF_UNIX
// address.
const (
	// UDSHostRoot is where the plugin mounts each pod's socket directory on the node.
	UDSHostRoot = "/run/aether/uds"
	// MaxUnixPath is the longest path an AF_UNIX address holds on Linux: sun_path is 108 bytes,
	// one of them the terminating NUL.
	MaxUnixPath = 107
	// PodUIDLength is the length of a pod UID as the API server writes it (a UUID's text form).
	PodUIDLength = 36
	// MaxUDSFile is the socket file name's budget, in bytes: what is left of MaxUnixPath after
	// UDSHostRoot, a slash, a pod UID and a slash. The volume name is not part of the path and
	// costs nothing.
	MaxUDSFile = MaxUnixPath - len(UDSHostRoot) - 1 - PodUIDLength - 1
	// MaxUDSSocketLength caps the annotation's value, in bytes: a volume name (a DNS label, 63
	// bytes) and a file name well past its budget, so that a file over budget is told its budget
	// rather than a length cap.
	MaxUDSSocketLength = 256
)

// UDSSocket is where a pod serves: a file directly inside one of its volumes.
type UDSSocket struct {
	// Volume is the name of the pod's volume that holds the socket (its csi.aether.io volume).
	Volume string `json:"volume"`
	// File is the socket's file name inside the volume.
	File string `json:"file"`
}

// String is the value as the annotation spells it: <volume>/<file>.
func (s UDSSocket) String() string { return s.Volume + "/" + s.File }

// HostPath is where the node's proxy dials the socket of the pod with uid, under root (the
// plugin's mount root, UDSHostRoot unless configured otherwise).
func (s UDSSocket) HostPath(root, uid string) string {
	return strings.TrimSuffix(root, "/") + "/" + uid + "/" + s.File
}

// udsFileName is the character set of a socket file name: portable file name characters.
var udsFileName = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)

// udsFix is what every malformed value is told.
const udsFix = `write <volume>/<socket-file>: the name of the pod's csi.aether.io volume (not its mount path) and a ` +
	`file directly inside it, for example "uds/app.sock"`

// ParseUDSSocket reads a <volume>/<socket-file> value: the annotation's (field is
// AnnotationUDSSocket) or an EndpointPolicy's (field is its path, spec.udsSocket). Its error is an
// *Error naming field, the value and the fix; its Kind is KindInvalidUDSSocket for the shape
// (segments, "..", an absolute path, the volume name), KindInvalidUDSFile for the file name's
// characters and KindUDSFileTooLong for a file name over MaxUDSFile.
func ParseUDSSocket(field, value string) (UDSSocket, error) {
	p := parser{annotations: map[string]string{field: value}}
	socket, ok := p.udsSocket(field, value)
	if !ok {
		return UDSSocket{}, p.errs[0]
	}
	return socket, nil
}

// udsSocketAnnotation reads AnnotationUDSSocket; nil when it is absent or after an error.
func (p *parser) udsSocketAnnotation() *UDSSocket {
	v, ok := p.lookup(AnnotationUDSSocket, udsFix)
	if !ok {
		return nil
	}
	socket, ok := p.udsSocket(AnnotationUDSSocket, v)
	if !ok {
		return nil
	}
	return &socket
}

// udsSocket parses value of field; ok is false after an error (one, the first found).
func (p *parser) udsSocket(field, value string) (UDSSocket, bool) {
	if len(value) > MaxUDSSocketLength {
		p.fail(field, value, KindTooLong, fmt.Sprintf("shorten it to at most %d bytes: %s", MaxUDSSocketLength, udsFix),
			"the value is %d bytes long, over the cap of %d bytes, and is not parsed", len(value), MaxUDSSocketLength)
		return UDSSocket{}, false
	}
	segments := strings.Split(value, "/")
	switch {
	case value == "":
		p.fail(field, value, KindEmpty, udsFix, "the value is empty")
		return UDSSocket{}, false
	case strings.HasPrefix(value, "/"):
		p.fail(field, value, KindInvalidUDSSocket, udsFix,
			"%q is an absolute path; the value names a volume of the pod, not a path on its filesystem", value)
		return UDSSocket{}, false
	case slices.Contains(segments, ".."):
		p.fail(field, value, KindInvalidUDSSocket, udsFix, "%q holds a \"..\" segment; the socket must lie directly inside the volume", value)
		return UDSSocket{}, false
	case len(segments) == 1:
		p.fail(field, value, KindInvalidUDSSocket, udsFix, "%q names no socket file; want a volume name, a slash and a file name", value)
		return UDSSocket{}, false
	case len(segments) > 2:
		p.fail(field, value, KindInvalidUDSSocket, udsFix,
			"%q has %d path segments; want exactly two, the volume and a file directly inside it (no subdirectories)", value, len(segments))
		return UDSSocket{}, false
	}
	volume, file := segments[0], segments[1]
	switch {
	case !dnsLabel.MatchString(volume):
		p.fail(field, volume, KindInvalidUDSSocket, udsFix,
			"volume name %q is not a DNS label (lowercase letters, digits and '-', at most 63), as a pod's volume names are", volume)
		return UDSSocket{}, false
	case file == "" || file == "." || !udsFileName.MatchString(file):
		p.fail(field, file, KindInvalidUDSFile, "name the socket file with letters, digits, '.', '_' and '-' only, for example \"app.sock\"",
			"socket file name %q is not a plain file name", file)
		return UDSSocket{}, false
	case len(file) > MaxUDSFile:
		p.fail(field, file, KindUDSFileTooLong,
			fmt.Sprintf("shorten the socket file name to at most %d bytes (the volume name costs nothing)", MaxUDSFile),
			"socket file name %q is %d bytes long, over its budget of %d bytes: the node path %s/<pod UID>/<file> must fit "+
				"the %d bytes of a Unix socket address", file, len(file), MaxUDSFile, ownWords(UDSHostRoot), MaxUnixPath)
		return UDSSocket{}, false
	}
	return UDSSocket{Volume: volume, File: file}, true
}
