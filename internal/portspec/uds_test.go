// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package portspec

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// udsFixText is the fix every malformed shape is told, as the rows below pin it.
const udsFixText = `(write <volume>/<socket-file>: the name of the pod's csi.aether.io volume (not its mount path) and a ` +
	`file directly inside it, for example "uds/app.sock")`

// TestMaxUDSFile: the budget is what the workload page states, 54 bytes, and a file of exactly
// that length under a 36-byte pod UID fills the 107 bytes of a Unix socket address.
func TestMaxUDSFile(t *testing.T) {
	if MaxUDSFile != 54 {
		t.Errorf("MaxUDSFile = %d, want 54", MaxUDSFile)
	}
	path := UDSSocket{Volume: "uds", File: strings.Repeat("f", MaxUDSFile)}.HostPath(UDSHostRoot, strings.Repeat("u", PodUIDLength))
	if len(path) != MaxUnixPath {
		t.Errorf("the longest host path is %d bytes (%s), want %d", len(path), path, MaxUnixPath)
	}
}

func TestParseUDSSocket(t *testing.T) {
	tests := map[string]struct {
		value string
		want  UDSSocket
		kind  Kind
		full  string
	}{
		"volume and file":      {value: "uds/app.sock", want: UDSSocket{Volume: "uds", File: "app.sock"}},
		"file at budget":       {value: "s/" + strings.Repeat("a", 54), want: UDSSocket{Volume: "s", File: strings.Repeat("a", 54)}},
		"long volume is free":  {value: strings.Repeat("v", 63) + "/a.sock", want: UDSSocket{Volume: strings.Repeat("v", 63), File: "a.sock"}},
		"underscores and dash": {value: "uds/my_app-1.sock", want: UDSSocket{Volume: "uds", File: "my_app-1.sock"}},
		"file over budget": {
			value: "uds/" + strings.Repeat("a", 55), kind: KindUDSFileTooLong,
			full: `spec.udsSocket: "uds/` + strings.Repeat("a", 55) + `": socket file name "` + strings.Repeat("a", 55) +
				`" is 55 bytes long, over its budget of 54 bytes: the node path /run/aether/uds/<pod UID>/<file> must fit the 107 bytes ` +
				`of a Unix socket address (shorten the socket file name to at most 54 bytes (the volume name costs nothing))`,
		},
		"absolute": {
			value: "/run/app/app.sock", kind: KindInvalidUDSSocket,
			full: `spec.udsSocket: "/run/app/app.sock": "/run/app/app.sock" is an absolute path; the value names a volume of the pod, ` +
				`not a path on its filesystem ` + udsFixText,
		},
		"dot dot": {
			value: "uds/../app.sock", kind: KindInvalidUDSSocket,
			full: `spec.udsSocket: "uds/../app.sock": "uds/../app.sock" holds a ".." segment; the socket must lie directly inside the volume ` + udsFixText,
		},
		"dot dot as file": {
			value: "uds/..", kind: KindInvalidUDSSocket,
			full: `spec.udsSocket: "uds/..": "uds/.." holds a ".." segment; the socket must lie directly inside the volume ` + udsFixText,
		},
		"extra segments": {
			value: "uds/run/app.sock", kind: KindInvalidUDSSocket,
			full: `spec.udsSocket: "uds/run/app.sock": "uds/run/app.sock" has 3 path segments; want exactly two, the volume and a file ` +
				`directly inside it (no subdirectories) ` + udsFixText,
		},
		"no file": {
			value: "app.sock", kind: KindInvalidUDSSocket,
			full: `spec.udsSocket: "app.sock": "app.sock" names no socket file; want a volume name, a slash and a file name ` + udsFixText,
		},
		"volume not a label": {
			value: "UDS/app.sock", kind: KindInvalidUDSSocket,
			full: `spec.udsSocket: "UDS/app.sock": volume name "UDS" is not a DNS label (lowercase letters, digits and '-', at most 63), ` +
				`as a pod's volume names are ` + udsFixText,
		},
		"empty file": {
			value: "uds/", kind: KindInvalidUDSFile,
			full: `spec.udsSocket: "uds/": socket file name "" is not a plain file name (name the socket file with letters, digits, ` +
				`'.', '_' and '-' only, for example "app.sock")`,
		},
		"space in file": {
			value: "uds/app sock", kind: KindInvalidUDSFile,
			full: `spec.udsSocket: "uds/app sock": socket file name "app sock" is not a plain file name (name the socket file with ` +
				`letters, digits, '.', '_' and '-' only, for example "app.sock")`,
		},
		"empty": {value: "", kind: KindEmpty, full: `spec.udsSocket: "": the value is empty ` + udsFixText},
		"over the cap": {
			value: "uds/" + strings.Repeat("a", MaxUDSSocketLength), kind: KindTooLong,
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseUDSSocket("spec.udsSocket", tt.value)
			if tt.kind == "" {
				if err != nil || got != tt.want {
					t.Fatalf("ParseUDSSocket(%q) = %+v, %v; want %+v", tt.value, got, err, tt.want)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("ParseUDSSocket(%q) = %+v, %v; want an *Error of kind %s", tt.value, got, err, tt.kind)
			}
			if e.Kind != tt.kind {
				t.Errorf("kind = %s, want %s (%v)", e.Kind, tt.kind, err)
			}
			if tt.full != "" && err.Error() != tt.full {
				t.Errorf("error text\n got %s\nwant %s", err.Error(), tt.full)
			}
			if got != (UDSSocket{}) {
				t.Errorf("an error returned %+v, want the zero UDSSocket", got)
			}
		})
	}
}

// TestParseUDSAnnotation: the annotation is part of the grammar (Parse reads it into the Spec,
// and refuses it with the same words, naming the annotation).
func TestParseUDSAnnotation(t *testing.T) {
	got, err := Parse(map[string]string{AnnotationUDSSocket: " uds/app.sock "})
	if err != nil {
		t.Fatal(err)
	}
	want := with(spec(DefaultPort, http1(DefaultPort)), func(s *Spec) { s.UDSSocket = &UDSSocket{Volume: "uds", File: "app.sock"} })
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Parse = %+v, want %+v", got, want)
	}

	_, err = Parse(map[string]string{AnnotationUDSSocket: "uds/a/b.sock"})
	wantText := `endpoint.aether.io/uds-socket: "uds/a/b.sock": "uds/a/b.sock" has 3 path segments; want exactly two, the volume ` +
		`and a file directly inside it (no subdirectories) ` + udsFixText
	if err == nil || err.Error() != wantText {
		t.Errorf("Parse error\n got %v\nwant %s", err, wantText)
	}
}

// FuzzParseUDSSocket: whatever the value, ParseUDSSocket either returns a socket that spells the
// value back, with a DNS-label volume and a file within its budget, or an *Error of one of its
// kinds that quotes at most MaxQuoted bytes of the value.
func FuzzParseUDSSocket(f *testing.F) {
	for _, seed := range []string{"uds/app.sock", "/abs/x", "a/../b", "a/b/c", "a", "", "UDS/x", "s/" + strings.Repeat("a", 60)} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, value string) {
		s, err := ParseUDSSocket("spec.udsSocket", value)
		if err == nil {
			if s.String() != value || !dnsLabel.MatchString(s.Volume) || len(s.File) == 0 || len(s.File) > MaxUDSFile {
				t.Fatalf("ParseUDSSocket(%q) = %+v, which does not spell the value back within the grammar", value, s)
			}
			return
		}
		var e *Error
		if !errors.As(err, &e) {
			t.Fatalf("ParseUDSSocket(%q): %T is not an *Error", value, err)
		}
		switch e.Kind {
		case KindEmpty, KindTooLong, KindInvalidUDSSocket, KindInvalidUDSFile, KindUDSFileTooLong:
		default:
			t.Fatalf("ParseUDSSocket(%q): kind %s", value, e.Kind)
		}
		if len(e.Value) > MaxQuoted+len("…") {
			t.Fatalf("ParseUDSSocket(%q): the error quotes %d bytes", value, len(e.Value))
		}
	})
}
