// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package authz

import (
	"fmt"
	"net/url"
	"path"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	configv1 "github.com/aether-mesh/aether-operator/api/config/v1"
	"github.com/aether-mesh/aether-operator/internal/portspec"
)

// Validate returns what admission refuses in an AccessPolicy's spec, each problem naming the
// field, the value and the fix, in field order; nil when the spec is valid. The CRD's schema
// already holds the counts, lengths and ranges, and exactly one of serviceAccount and namespace
// per source (a CEL rule): Validate judges what the schema cannot say.
func Validate(spec configv1.AccessPolicySpec) []string {
	var problems []string
	if spec.TargetRef == nil && len(spec.Ports) > 0 {
		problems = append(problems, fmt.Sprintf("spec.ports: %v: ports are only of a target: without spec.targetRef the policy "+
			"governs every port of every Service in its namespace (set spec.targetRef to the Service these ports are of, or remove spec.ports)",
			spec.Ports))
	}
	for i, p := range spec.Ports {
		if why, reserved := portspec.Reserved[p]; reserved {
			problems = append(problems, fmt.Sprintf("spec.ports[%d]: %d: port %d is the mesh's own: %s; no service declares it, so "+
				"no policy can govern it (remove %d)", i, p, p, why, p))
		}
	}
	for i, rule := range spec.Rules {
		field := fmt.Sprintf("spec.rules[%d]", i)
		for j, from := range rule.From {
			problems = append(problems, validateSource(fmt.Sprintf("%s.from[%d]", field, j), from)...)
		}
		for j, m := range rule.Methods {
			if problem := validateMethod(m); problem != "" {
				problems = append(problems, fmt.Sprintf("%s.methods[%d]: %q: %s", field, j, m, problem))
			}
		}
		for j, p := range rule.PathPrefixes {
			if problem := validatePathPrefix(p); problem != "" {
				problems = append(problems, fmt.Sprintf("%s.pathPrefixes[%d]: %q: %s", field, j, p, problem))
			}
		}
	}
	return problems
}

func validateSource(field string, from configv1.AccessSource) []string {
	var problems []string
	if sa := from.ServiceAccount; sa != nil {
		if errs := validation.IsDNS1123Subdomain(sa.Name); len(errs) > 0 {
			problems = append(problems, fmt.Sprintf("%s.serviceAccount.name: %q: not a ServiceAccount name: %s (write the name "+
				"kubectl get serviceaccounts shows)", field, sa.Name, strings.Join(errs, "; ")))
		}
		if sa.Namespace != "" {
			if errs := validation.IsDNS1123Label(sa.Namespace); len(errs) > 0 {
				problems = append(problems, fmt.Sprintf("%s.serviceAccount.namespace: %q: not a namespace name: %s (write the name "+
					"kubectl get namespaces shows, or omit it for the policy's own namespace)", field, sa.Namespace, strings.Join(errs, "; ")))
			}
		}
	}
	if from.Namespace != "" {
		if errs := validation.IsDNS1123Label(from.Namespace); len(errs) > 0 {
			problems = append(problems, fmt.Sprintf("%s.namespace: %q: not a namespace name: %s (write the name kubectl get "+
				"namespaces shows)", field, from.Namespace, strings.Join(errs, "; ")))
		}
	}
	return problems
}

// validateMethod says what is wrong with an HTTP method ("" when nothing): it must be an HTTP
// token, and upper case, since methods are compared case-sensitively and the methods clients
// send are upper case ("get" would never match GET).
func validateMethod(m string) string {
	for _, c := range m {
		if !isTokenChar(c) {
			return fmt.Sprintf("not an HTTP method: a method is a token, letters, digits and !#$%%&'*+-.^_`|~ only, and %q is not one "+
				"of them (write a method such as GET or POST)", c)
		}
	}
	if upper := strings.ToUpper(m); upper != m {
		return fmt.Sprintf("methods are compared case-sensitively and clients send them upper case, so %q would never match "+
			"(write %q)", m, upper)
	}
	return ""
}

func isTokenChar(c rune) bool {
	return c < 0x7f && (c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("!#$%&'*+-.^_`|~", c))
}

// validatePathPrefix says what is wrong with a path prefix ("" when nothing). The proxy compares
// a request's normalized path (without its query or fragment, "." and ".." resolved, no
// percent-encoded bytes left to decode, "//" merged): a prefix that is not itself in that form
// could never match, or would seem to close a path it does not.
func validatePathPrefix(p string) string {
	const normalized = "the proxy compares the request's normalized path"
	switch {
	case !strings.HasPrefix(p, "/"):
		return fmt.Sprintf("a path prefix starts with \"/\" (write %q)", "/"+p)
	case strings.ContainsAny(p, "?#"):
		cut := p[:strings.IndexAny(p, "?#")]
		return fmt.Sprintf("%s, without its query or fragment, so a prefix holding \"?\" or \"#\" could never match (write %q)", normalized, cut)
	case strings.Contains(p, "%"):
		fix := "write the bytes themselves"
		if decoded, err := url.PathUnescape(p); err == nil && validatePathPrefix(decoded) == "" {
			fix = fmt.Sprintf("write %q", decoded)
		}
		return fmt.Sprintf("%s, with percent-encoded bytes decoded, so a prefix holding percent-encoding could never match (%s)", normalized, fix)
	case strings.Contains(p, "//"):
		return fmt.Sprintf("%s, with \"//\" merged into \"/\", so this prefix could never match (write %q)", normalized, cleanPrefix(p))
	}
	for seg := range strings.SplitSeq(p, "/") {
		if seg == "." || seg == ".." {
			return fmt.Sprintf("%s, with \".\" and \"..\" segments resolved, so a prefix holding one could never match (write %q)",
				normalized, cleanPrefix(p))
		}
	}
	return ""
}

// cleanPrefix is p normalized as the proxy normalizes paths, keeping a trailing "/".
func cleanPrefix(p string) string {
	clean := path.Clean(p)
	if strings.HasSuffix(p, "/") && clean != "/" {
		clean += "/"
	}
	return clean
}
