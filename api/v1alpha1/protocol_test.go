// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package v1alpha1_test

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"testing"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
)

// TestIsHTTP: HTTP and HTTP2 are the HTTP class (routed by the Host header), TCP and anything
// that is no protocol are not.
func TestIsHTTP(t *testing.T) {
	for p, want := range map[meshv1alpha1.Protocol]bool{
		meshv1alpha1.ProtocolHTTP:  true,
		meshv1alpha1.ProtocolHTTP2: true,
		meshv1alpha1.ProtocolTCP:   false,
		"":                         false,
		"http":                     false, // the API's spellings are upper case: the enum refuses others
		"GRPC":                     false, // an app protocol, not a protocol
	} {
		if got := p.IsHTTP(); got != want {
			t.Errorf("Protocol(%q).IsHTTP() = %v, want %v", p, got, want)
		}
	}
}

// TestReservedPortsRuleMatchesConstants pins the MeshEndpoint CRD's CEL rule on spec.ports[].port
// to the mesh's port constants: a marker is a literal, so a port added to or dropped from either
// side without the other fails here, in the rule and in its message.
func TestReservedPortsRuleMatchesConstants(t *testing.T) {
	want := []int{int(meshv1alpha1.MeshHTTPPort), int(meshv1alpha1.MeshTCPPort), int(meshv1alpha1.ProxyCapturePort), int(meshv1alpha1.ProxyInboundPort)}
	slices.Sort(want)

	rules, _ := schemaAt(t, crdSchema(t, "mesh.aether.io_meshendpoints.yaml"), "spec.ports.[].port")["x-kubernetes-validations"].([]any)
	if len(rules) != 1 {
		t.Fatalf("spec.ports[].port has %d CEL rules, want the one refusing the mesh's ports: %v", len(rules), rules)
	}
	rule, _ := rules[0].(map[string]any)
	list := regexp.MustCompile(`^!\(self in \[([0-9, ]*)\]\)$`).FindStringSubmatch(fmt.Sprint(rule["rule"]))
	if list == nil {
		t.Fatalf("spec.ports[].port's rule is %q, want !(self in [<the mesh's ports>])", rule["rule"])
	}
	for what, text := range map[string]string{"rule": list[1], "message": fmt.Sprint(rule["message"])} {
		if got := numbers(t, text); !slices.Equal(got, want) {
			t.Errorf("spec.ports[].port's CEL %s names ports %v; the API's constants are %v", what, got, want)
		}
	}
}

// numbers returns the decimal numbers text names, sorted.
func numbers(t *testing.T, text string) []int {
	t.Helper()
	var out []int
	for _, s := range regexp.MustCompile(`[0-9]+`).FindAllString(text, -1) {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}
