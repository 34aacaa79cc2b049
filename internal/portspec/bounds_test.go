// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package portspec

import (
	"errors"
	"fmt"
	"go/ast"
	goparser "go/parser"
	"go/token"
	"slices"
	"strings"
	"testing"
)

// denialBound is the most bytes the text of any ErrorList may take, whatever the pod carries:
// the admission denial, the agent's Event and condition quote it.
const denialBound = 4 * 1024

// hostileSizes are the sizes the hostile shapes are built at: under a list's cap, over it, and
// the most annotations the API server lets a pod carry (256 KiB, keys included).
var hostileSizes = map[string]int{"1KiB": 1 << 10, "64KiB": 64 << 10, "256KiB": 256 << 10}

// hostile is one shape of hostile annotations, built at a size.
type hostile struct {
	build func(size int) map[string]string
	// first is the Kind of the first error at size; "" when the annotations are valid.
	first func(size int) Kind
}

// repeatTo repeats unit until the result is size bytes long (the last unit cut).
func repeatTo(unit string, size int) string {
	return strings.Repeat(unit, size/len(unit)+1)[:size]
}

// manyKeys is about size bytes of annotations, each key made by key(i), each value value.
func manyKeys(size int, key func(int) string, value string) map[string]string {
	a := map[string]string{}
	for i, used := 0, 0; used < size; i++ {
		k := key(i)
		a[k] = value
		used += len(k) + len(value)
	}
	return a
}

// always and overCap say which Kind a shape's first error is.
func always(k Kind) func(int) Kind { return func(int) Kind { return k } }

func overCap(limit int, under Kind) func(int) Kind {
	return func(size int) Kind {
		if size > limit {
			return KindTooLong
		}
		return under
	}
}

// hostileShapes are the shapes a hostile tenant probes the parser with: large values in every
// annotation, every error repeated as often as the size allows, and many keys.
func hostileShapes() map[string]hostile {
	sixtyFour := portList(10000, MaxPorts-1, "tcp") + ",8080" // the primary is the 64th
	validMetadata := func(n int) map[string]string {
		return manyKeys(n, func(i int) string { return fmt.Sprintf("%sk%06d", AnnotationMetadataPrefix, i) }, "v")
	}
	return map[string]hostile{
		"ports all commas": {
			build: func(n int) map[string]string { return one(AnnotationPorts, strings.Repeat(",", n)) },
			first: overCap(MaxPortsLength, KindEmpty),
		},
		"ports all bad suffixes": {
			build: func(n int) map[string]string { return one(AnnotationPorts, repeatTo("9000=tpc,", n)) },
			first: overCap(MaxPortsLength, KindUnknownSuffix),
		},
		"ports a valid 64-port list padded with spaces": {
			build: func(n int) map[string]string {
				return one(AnnotationPorts, sixtyFour+strings.Repeat(" ", n-len(sixtyFour)))
			},
			first: overCap(MaxPortsLength, ""),
		},
		"ports invalid UTF-8 (quoted at 4 bytes a byte)": {
			build: func(n int) map[string]string { return one(AnnotationPorts, repeatTo("\xff,", n)) },
			first: overCap(MaxPortsLength, KindNotAPort),
		},
		"upstreams all bad names": {
			build: func(n int) map[string]string { return one(AnnotationUpstreams, repeatTo("Payments,", n)) },
			first: overCap(MaxUpstreamsLength, KindInvalidUpstream),
		},
		"weight": {
			build: func(n int) map[string]string { return one(AnnotationWeight, strings.Repeat("9", n)) },
			first: always(KindTooLong),
		},
		"health path": {
			build: func(n int) map[string]string { return one(AnnotationHealthPath, "/"+strings.Repeat("p", n-1)) },
			first: overCap(MaxHealthPath, ""),
		},
		"metadata value": {
			build: func(n int) map[string]string { return one(AnnotationMetadataPrefix+"blob", strings.Repeat("v", n)) },
			first: always(KindInvalidMetadataValue),
		},
		"metadata key": {
			build: func(n int) map[string]string { return one(AnnotationMetadataPrefix+strings.Repeat("\x01", n), "v") },
			first: always(KindInvalidMetadataKey),
		},
		"unknown annotation key": {
			build: func(n int) map[string]string { return one(endpointPrefix+strings.Repeat("x", n), "8080") },
			first: always(KindUnknownAnnotation),
		},
		"unknown annotation value": {
			build: func(n int) map[string]string { return one("endpoint.aether.io/prots", strings.Repeat(",", n)) },
			first: always(KindUnknownAnnotation),
		},
		"many unknown endpoint.aether.io/ keys": {
			build: func(n int) map[string]string {
				return manyKeys(n, func(i int) string { return fmt.Sprintf("%sport%06d", endpointPrefix, i) }, "8080")
			},
			first: always(KindUnknownAnnotation),
		},
		"many bad metadata keys": {
			build: func(n int) map[string]string {
				return manyKeys(n, func(i int) string { return fmt.Sprintf("%sK%06d", AnnotationMetadataPrefix, i) }, "v")
			},
			first: always(KindInvalidMetadataKey),
		},
		"many valid metadata keys": {
			build: validMetadata,
			first: func(n int) Kind {
				if len(validMetadata(n)) > MaxMetadata {
					return KindTooManyMetadata
				}
				return ""
			},
		},
		"many keys one edit from ours": {
			build: func(n int) map[string]string {
				a := manyKeys(n, func(i int) string { return fmt.Sprintf("endpoints.aether.io/p%06d", i) }, ",")
				a[AnnotationWeight] = "0"
				return a
			},
			first: always(KindInvalidWeight),
		},
		"every annotation at once": {
			build: func(n int) map[string]string {
				part := n / 8
				return map[string]string{
					AnnotationPort: strings.Repeat("8", part), AnnotationPorts: repeatTo("x=y,", part),
					AnnotationProtocol: strings.Repeat("u", part), AnnotationWeight: strings.Repeat("0", part),
					AnnotationHealthPath: strings.Repeat(" ", part), AnnotationHealthCheckMode: strings.Repeat("m", part),
					AnnotationUpstreams: repeatTo(",", part), AnnotationMetadataPrefix + "x": strings.Repeat("v", part),
				}
			},
			// Sorted by key, config.aether.io/upstreams comes first: empty elements until over its cap.
			first: overCap(8*MaxUpstreamsLength, KindEmpty),
		},
	}
}

// TestHostileAnnotationsBounded: whatever the shape and size of hostile annotations, the errors
// are at most MaxErrors and a count, each quotes at most MaxQuoted bytes of input, and the whole
// text stays under denialBound: a bound on bytes, not on time.
func TestHostileAnnotationsBounded(t *testing.T) {
	for name, shape := range hostileShapes() {
		for sizeName, size := range hostileSizes {
			t.Run(name+" "+sizeName, func(t *testing.T) {
				annotations := shape.build(size)
				_, err := Parse(annotations)
				want := shape.first(size)
				if want == "" {
					if err != nil {
						t.Fatalf("valid annotations refused: %v", excerpt(err.Error(), denialBound))
					}
					return
				}
				var list ErrorList
				if !errors.As(err, &list) {
					t.Fatalf("got %T %v, want an ErrorList", err, err)
				}
				text := list.Error()
				if len(text) >= denialBound || len(text) > MaxErrorText {
					t.Fatalf("error text is %d bytes, want under %d (MaxErrorText %d):\n%s",
						len(text), denialBound, MaxErrorText, excerpt(text, 2*denialBound))
				}
				if len(list) > MaxErrors+1 {
					t.Errorf("%d errors reported, want at most %d and a count", len(list), MaxErrors)
				}
				if list[0].Kind != want {
					t.Errorf("first error is %s, want %s:\n%s", list[0].Kind, want, text)
				}
				checkErrorList(t, annotations, list)
			})
		}
	}
}

// TestTooLongAtTheCap: each capped annotation is read at exactly its cap (no TooLong, whatever
// else is wrong) and refused one byte over it; a valid list at its cap parses.
func TestTooLongAtTheCap(t *testing.T) {
	for _, key := range grammarKeys {
		if _, capped := MaxLength[key]; !capped {
			t.Errorf("%s has no cap in MaxLength", key)
		}
	}
	for key, limit := range MaxLength {
		t.Run(key, func(t *testing.T) {
			_, err := Parse(one(key, strings.Repeat("9", limit)))
			var list ErrorList
			if errors.As(err, &list) && slices.Contains(list.Kinds(), KindTooLong) {
				t.Errorf("a value of exactly %d bytes is TooLong: %v", limit, err)
			}
			_, err = Parse(one(key, strings.Repeat("9", limit+1)))
			if !errors.As(err, &list) || !slices.Equal(list.Kinds(), []Kind{KindTooLong}) {
				t.Fatalf("a value of %d bytes: got %v, want one TooLong", limit+1, err)
			}
			want := fmt.Sprintf("%s: %q: the value is %d bytes long, over the cap of %d bytes, and is not parsed (shorten it to at most %d bytes: ",
				key, strings.Repeat("9", MaxQuoted)+"…", limit+1, limit, limit)
			if !strings.HasPrefix(err.Error(), want) {
				t.Errorf("got %s\nwant it to start %s", err, want)
			}
		})
	}

	spaced := strings.ReplaceAll(portList(10000, MaxPorts-1, "http2")+",8080", ",", " , ")
	ports := spaced + strings.Repeat(" ", MaxPortsLength-len(spaced))
	upstreams := repeatTo("payments.finance,", MaxUpstreamsLength-1) + "a"
	for name, annotations := range map[string]map[string]string{
		"64 ports, longest suffix, spaced, padded to the cap": {AnnotationPorts: ports},
		"upstreams at the cap":                                {AnnotationUpstreams: upstreams},
		"health path at the cap":                              {AnnotationHealthPath: "/" + strings.Repeat("p", MaxHealthPath-1)},
	} {
		t.Run(name, func(t *testing.T) {
			for key, value := range annotations {
				if len(value) != MaxLength[key] {
					t.Fatalf("test input is %d bytes, want the cap %d", len(value), MaxLength[key])
				}
			}
			if _, err := Parse(annotations); err != nil {
				t.Errorf("refused: %v", err)
			}
		})
	}
}

// TestErrorTextBudget: when errors are long, fewer than MaxErrors are shown so the text stays
// within MaxErrorText, the first is always shown, and the count covers every one left out.
func TestErrorTextBudget(t *testing.T) {
	const keys = 40
	annotations := map[string]string{}
	for i := range keys {
		// Unknown keys of Kubernetes' longest name: each line quotes a 317-byte key.
		annotations[fmt.Sprintf("endpoint.aether.io/%s%03d", strings.Repeat("k", maxQuotedKey-len(endpointPrefix)-3), i)] = "x"
	}
	_, err := Parse(annotations)
	var list ErrorList
	if !errors.As(err, &list) {
		t.Fatalf("got %v, want an ErrorList", err)
	}
	text := list.Error()
	shown := len(list) - 1
	last := list[len(list)-1]
	if last.Kind != KindMoreErrors || shown >= MaxErrors || shown < 1 || shown+last.More != keys {
		t.Errorf("%d errors shown and %d counted (%s), want fewer than %d shown and %d in all", shown, last.More, last.Kind, MaxErrors, keys)
	}
	if len(text) > MaxErrorText {
		t.Errorf("text is %d bytes, over MaxErrorText %d", len(text), MaxErrorText)
	}
	checkErrorList(t, annotations, list)
}

// TestAllKindsComplete: AllKinds lists every Kind constant errors.go declares, so a metric
// exported per kind cannot miss one. The negative control: a Kind missing from the list is
// reported (checked by removing one from a copy).
func TestAllKindsComplete(t *testing.T) {
	declared := declaredKinds(t)
	if missing := kindsMissing(declared, AllKinds()); len(missing) > 0 {
		t.Errorf("AllKinds lacks %v", missing)
	}
	if len(declared) != len(AllKinds()) {
		t.Errorf("errors.go declares %d kinds, AllKinds lists %d", len(declared), len(AllKinds()))
	}
	if missing := kindsMissing(declared, AllKinds()[1:]); !slices.Equal(missing, []string{"KindEmpty"}) {
		t.Errorf("control: dropping KindEmpty from the list reports %v, want [KindEmpty]", missing)
	}
}

// declaredKinds parses errors.go for the names of its constants of type Kind.
func declaredKinds(t *testing.T) []string {
	t.Helper()
	file, err := goparser.ParseFile(token.NewFileSet(), "errors.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	ast.Inspect(file, func(n ast.Node) bool {
		if spec, ok := n.(*ast.ValueSpec); ok {
			if ident, ok := spec.Type.(*ast.Ident); ok && ident.Name == "Kind" {
				for _, name := range spec.Names {
					names = append(names, name.Name)
				}
			}
		}
		return true
	})
	return names
}

// kindsMissing names the declared kinds (KindX constants, whose value is "X") not in list.
func kindsMissing(declared []string, list []Kind) []string {
	var missing []string
	for _, name := range declared {
		if !slices.Contains(list, Kind(strings.TrimPrefix(name, "Kind"))) {
			missing = append(missing, name)
		}
	}
	return missing
}
