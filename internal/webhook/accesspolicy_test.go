// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package webhook

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	configv1 "github.com/aether-mesh/aether-operator/api/config/v1"
)

const deniedAccess = `admission webhook "vaccesspolicy.config.aether.io" denied the request: `

// allow is a rule admitting ServiceAccount web, narrowed by methods and paths.
func allow(methods, paths []string, from ...configv1.AccessSource) configv1.AccessRule {
	if len(from) == 0 {
		from = []configv1.AccessSource{{ServiceAccount: &configv1.ServiceAccountRef{Name: "web"}}}
	}
	return configv1.AccessRule{From: from, Methods: methods, PathPrefixes: paths}
}

var echo = &configv1.TargetRef{Kind: configv1.KindService, Name: "echo"}

// TestAccessPolicyValidation: each spec the schema cannot refuse but the mesh could never
// enforce as written is denied at apply time, the message naming the field, the value and the
// fix; valid policies, a namespace-wide one with methods and paths among them, are admitted.
func TestAccessPolicyValidation(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t, ctx)
	const normalized = "the proxy compares the request's normalized path"
	tests := map[string]struct {
		spec   configv1.AccessPolicySpec
		denial string // empty: admitted
	}{
		"valid": {spec: configv1.AccessPolicySpec{TargetRef: echo, Ports: []int32{8080},
			Rules: []configv1.AccessRule{allow([]string{"GET", "M-SEARCH"}, []string{"/", "/api/", "/a.b/c"})}}},
		"namespace-wide with methods and paths": {spec: configv1.AccessPolicySpec{
			Rules: []configv1.AccessRule{allow([]string{"GET"}, []string{"/healthz"}, configv1.AccessSource{Namespace: "monitoring"})}}},
		"namespace default deny": {spec: configv1.AccessPolicySpec{}},
		"ports without target": {spec: configv1.AccessPolicySpec{Ports: []int32{8080}},
			denial: `spec.ports: [8080]: ports are only of a target: without spec.targetRef the policy governs every port of every ` +
				`Service in its namespace (set spec.targetRef to the Service these ports are of, or remove spec.ports)`},
		"a mesh port": {spec: configv1.AccessPolicySpec{TargetRef: echo, Ports: []int32{8080, 18054}},
			denial: `spec.ports[1]: 18054: port 18054 is the mesh's own: the mesh DNS answers the pod's DNS queries on it inside every ` +
				`pod; no service declares it, so no policy can govern it (remove 18054)`},
		"lower-case method": {spec: configv1.AccessPolicySpec{Rules: []configv1.AccessRule{allow([]string{"get"}, nil)}},
			denial: `spec.rules[0].methods[0]: "get": methods are compared case-sensitively and clients send them upper case, so "get" ` +
				`would never match (write "GET")`},
		"method not a token": {spec: configv1.AccessPolicySpec{Rules: []configv1.AccessRule{allow([]string{"GET", "GET /"}, nil)}},
			denial: `spec.rules[0].methods[1]: "GET /": not an HTTP method: a method is a token, letters, digits and ` +
				"!#$%&'*+-.^_`|~ only, and ' ' is not one of them (write a method such as GET or POST)"},
		"relative path": {spec: configv1.AccessPolicySpec{Rules: []configv1.AccessRule{allow(nil, []string{"api"})}},
			denial: `spec.rules[0].pathPrefixes[0]: "api": a path prefix starts with "/" (write "/api")`},
		"query": {spec: configv1.AccessPolicySpec{Rules: []configv1.AccessRule{allow(nil, []string{"/api?x=1"})}},
			denial: `spec.rules[0].pathPrefixes[0]: "/api?x=1": ` + normalized + `, without its query or fragment, so a prefix ` +
				`holding "?" or "#" could never match (write "/api")`},
		"fragment": {spec: configv1.AccessPolicySpec{Rules: []configv1.AccessRule{allow(nil, []string{"/", "/docs#top"})}},
			denial: `spec.rules[0].pathPrefixes[1]: "/docs#top": ` + normalized + `, without its query or fragment, so a prefix ` +
				`holding "?" or "#" could never match (write "/docs")`},
		"double slash": {spec: configv1.AccessPolicySpec{Rules: []configv1.AccessRule{allow(nil, []string{"/api//v1/"})}},
			denial: `spec.rules[0].pathPrefixes[0]: "/api//v1/": ` + normalized + `, with "//" merged into "/", so this prefix ` +
				`could never match (write "/api/v1/")`},
		"dot dot": {spec: configv1.AccessPolicySpec{Rules: []configv1.AccessRule{allow(nil, []string{"/public/../admin"})}},
			denial: `spec.rules[0].pathPrefixes[0]: "/public/../admin": ` + normalized + `, with "." and ".." segments resolved, so ` +
				`a prefix holding one could never match (write "/admin")`},
		"dot": {spec: configv1.AccessPolicySpec{Rules: []configv1.AccessRule{allow(nil, []string{"/./api"})}},
			denial: `spec.rules[0].pathPrefixes[0]: "/./api": ` + normalized + `, with "." and ".." segments resolved, so ` +
				`a prefix holding one could never match (write "/api")`},
		"percent-encoded": {spec: configv1.AccessPolicySpec{Rules: []configv1.AccessRule{allow(nil, []string{"/caf%C3%A9"})}},
			denial: `spec.rules[0].pathPrefixes[0]: "/caf%C3%A9": ` + normalized + `, with percent-encoded bytes decoded, so a ` +
				`prefix holding percent-encoding could never match (write "/café")`},
		"percent-encoded slash": {spec: configv1.AccessPolicySpec{Rules: []configv1.AccessRule{allow(nil, []string{"/a%2F%2Fb"})}},
			denial: `spec.rules[0].pathPrefixes[0]: "/a%2F%2Fb": ` + normalized + `, with percent-encoded bytes decoded, so a ` +
				`prefix holding percent-encoding could never match (write the bytes themselves)`},
		"service account name": {spec: configv1.AccessPolicySpec{Rules: []configv1.AccessRule{allow(nil, nil,
			configv1.AccessSource{ServiceAccount: &configv1.ServiceAccountRef{Name: "Web_1"}})}},
			denial: `spec.rules[0].from[0].serviceAccount.name: "Web_1": not a ServiceAccount name: a lowercase RFC 1123 subdomain ` +
				`must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character ` +
				`(e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*') ` +
				`(write the name kubectl get serviceaccounts shows)`},
		"service account namespace": {spec: configv1.AccessPolicySpec{Rules: []configv1.AccessRule{allow(nil, nil,
			configv1.AccessSource{ServiceAccount: &configv1.ServiceAccountRef{Namespace: "a.b", Name: "web"}})}},
			denial: `spec.rules[0].from[0].serviceAccount.namespace: "a.b": not a namespace name: must not contain dots (write the ` +
				`name kubectl get namespaces shows, or omit it for the policy's own namespace)`},
		"namespace": {spec: configv1.AccessPolicySpec{Rules: []configv1.AccessRule{allow(nil, nil, configv1.AccessSource{Namespace: "Shop"})}},
			denial: `spec.rules[0].from[0].namespace: "Shop": not a namespace name: a lowercase RFC 1123 label must ` +
				`consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. ` +
				`'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?') (write the name kubectl ` +
				`get namespaces shows)`},
		"every problem at once": {spec: configv1.AccessPolicySpec{Ports: []int32{18081},
			Rules: []configv1.AccessRule{allow([]string{"Get"}, []string{"x"})}},
			denial: `spec.ports: [18081]: ports are only of a target: without spec.targetRef the policy governs every port of every ` +
				`Service in its namespace (set spec.targetRef to the Service these ports are of, or remove spec.ports); ` +
				`spec.ports[0]: 18081: port 18081 is the mesh's own: it is the mesh's HTTP proxy port, where the Host header decides ` +
				`the destination; it is not a port of any service; no service declares it, so no policy can govern it (remove 18081); ` +
				`spec.rules[0].methods[0]: "Get": methods are compared case-sensitively and clients send them upper case, so "Get" ` +
				`would never match (write "GET"); spec.rules[0].pathPrefixes[0]: "x": a path prefix starts with "/" (write "/x")`},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			p := &configv1.AccessPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: strings.ReplaceAll(name, " ", "-")}, Spec: tt.spec}
			err := env.Client.Create(ctx, p)
			switch {
			case tt.denial == "" && err != nil:
				t.Fatalf("a valid policy was refused: %v", err)
			case tt.denial != "" && err == nil:
				t.Fatalf("policy %+v was admitted, want denied: %s", tt.spec, tt.denial)
			case tt.denial != "" && err.Error() != deniedAccess+tt.denial:
				t.Errorf("denial\n got %v\nwant %s", err, deniedAccess+tt.denial)
			}
		})
	}
}

// TestAccessPolicyValidationOnUpdate: an admitted policy changed into one the mesh could never
// enforce as written is denied too, and keeps its last spec.
func TestAccessPolicyValidationOnUpdate(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t, ctx)
	p := &configv1.AccessPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "update"},
		Spec: configv1.AccessPolicySpec{TargetRef: echo, Rules: []configv1.AccessRule{allow([]string{"GET"}, nil)}}}
	if err := env.Client.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	p.Spec.Rules[0].Methods = []string{"get"}
	err := env.Client.Update(ctx, p)
	want := deniedAccess + `spec.rules[0].methods[0]: "get": methods are compared case-sensitively and clients send them upper ` +
		`case, so "get" would never match (write "GET")`
	if err == nil || err.Error() != want {
		t.Errorf("updating methods to [get]: got %v, want %s", err, want)
	}
}

// TestAccessSourceExactlyOne: the CRD's CEL rule, enforced by the API server itself, refuses a
// source with both serviceAccount and namespace, or with neither.
func TestAccessSourceExactlyOne(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t, ctx)
	for name, from := range map[string]configv1.AccessSource{
		"both":    {ServiceAccount: &configv1.ServiceAccountRef{Name: "web"}, Namespace: "shop"},
		"neither": {},
	} {
		t.Run(name, func(t *testing.T) {
			p := &configv1.AccessPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "source-" + name},
				Spec: configv1.AccessPolicySpec{Rules: []configv1.AccessRule{allow(nil, nil, from)}}}
			err := env.Client.Create(ctx, p)
			const want = `spec.rules[0].from[0]: Invalid value: set exactly one of serviceAccount and namespace`
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("a source with %s: got %v, want an error containing %s", name, err, want)
			}
		})
	}
}
