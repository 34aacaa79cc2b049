// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package portspec

import (
	"fmt"
	"slices"
	"strings"
)

// MaxWarnings is the most warnings Warnings returns, the last counting the rest when there are
// more: a user reads them at kubectl's prompt.
const MaxWarnings = 5

// grammarKeys are the grammar's fixed keys, for the typo check.
var grammarKeys = append(slices.Clone(knownEndpointKeys), AnnotationUpstreams, AnnotationExcludeOutboundPorts, AnnotationIdentityGate, AnnotationMeshDNS)

// Warnings names the annotations that look like a misspelling of the grammar's: a key within
// two edits of one of its keys (endpoints.aether.io/ports, config.aether.io/upstream), or a key
// whose prefix is within two edits of one of its prefixes (metadata.endpoints.aether.io/zone).
// Parse ignores such keys, so what they say would be lost without a word. The admission webhook
// returns these as warnings, which never deny.
//
// At most MaxWarnings, in key order; keys longer than Kubernetes allows (maxQuotedKey) are not
// considered, and the edit distance is only computed for strings of similar, bounded length, so
// the cost is linear in the number of keys.
func Warnings(annotations map[string]string) []string {
	// The first keys in key order, kept sorted while reading (no sort of every key), and a count.
	var first []string
	typos := 0
	for key := range annotations {
		if _, _, ok := meantKey(key); !ok {
			continue
		}
		typos++
		at, _ := slices.BinarySearch(first, key)
		if at < MaxWarnings {
			first = slices.Insert(first, at, key)
			first = first[:min(len(first), MaxWarnings)]
		}
	}
	var warnings []string
	for i, key := range first {
		if i == MaxWarnings-1 && typos > MaxWarnings {
			warnings = append(warnings, fmt.Sprintf("and %d more annotations that look like misspelt mesh annotations, "+
				"and are ignored", typos-i))
			break
		}
		prefix, name, _ := meantKey(key)
		warnings = append(warnings, fmt.Sprintf("annotation %q is not a mesh annotation and is ignored; did you mean %q?", key, prefix+name))
	}
	return warnings
}

// meantKey returns the grammar key that key most likely misspells, in two parts (prefix and
// name, concatenated only for a warning shown), if it looks like one.
func meantKey(key string) (prefix, name string, ok bool) {
	if IsGrammarKey(key) || len(key) > maxQuotedKey {
		return "", "", false
	}
	if meant := closest(key, grammarKeys); meant != "" {
		return meant, "", true
	}
	slash := strings.IndexByte(key, '/')
	if slash < 0 {
		return "", "", false
	}
	keyPrefix, keyName := key[:slash+1], key[slash+1:] // the prefix keeps its slash, as ours do
	switch {
	case editDistance(keyPrefix, AnnotationMetadataPrefix) <= typoDistance:
		return AnnotationMetadataPrefix, keyName, true
	case editDistance(keyPrefix, endpointPrefix) <= typoDistance:
		if meant := closest(keyName, endpointNames); meant != "" {
			return endpointPrefix, meant, true
		}
		return endpointPrefix, keyName, true
	}
	return "", "", false
}

// endpointNames are the names of the grammar's keys under endpoint.aether.io/.
var endpointNames = func() []string {
	names := make([]string, len(knownEndpointKeys))
	for i, key := range knownEndpointKeys {
		names[i] = strings.TrimPrefix(key, endpointPrefix)
	}
	return names
}()
