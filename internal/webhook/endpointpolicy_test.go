// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package webhook

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	configv1 "github.com/aether-mesh/aether-operator/api/config/v1"
)

const deniedPolicy = `admission webhook "vendpointpolicy.config.aether.io" denied the request: `

// udsFix is the fix the parser gives every malformed socket value.
const udsFix = `(write <volume>/<socket-file>: the name of the pod's csi.aether.io volume (not its mount path) and a file ` +
	`directly inside it, for example "uds/app.sock")`

// TestEndpointPolicyValidation: a malformed spec.udsSocket, or a socket file over its budget, is
// denied at apply time with the parser's message naming the field, the value and the fix; a
// valid one, including a file of exactly 54 bytes, is admitted.
func TestEndpointPolicyValidation(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t, ctx)
	long := strings.Repeat("a", 55)
	tests := map[string]struct {
		socket string
		denial string // empty: admitted
	}{
		"valid":          {socket: "s/app.sock"},
		"file at budget": {socket: "s/" + strings.Repeat("a", 54)},
		"file over budget": {socket: "s/" + long, denial: `spec.udsSocket: "s/` + long + `": socket file name "` + long + `" is 55 bytes ` +
			`long, over its budget of 54 bytes: the node path /run/aether/uds/<pod UID>/<file> must fit the 107 bytes of a Unix socket ` +
			`address (shorten the socket file name to at most 54 bytes (the volume name costs nothing))`},
		"extra segments": {socket: "s/run/app.sock", denial: `spec.udsSocket: "s/run/app.sock": "s/run/app.sock" has 3 path segments; ` +
			`want exactly two, the volume and a file directly inside it (no subdirectories) ` + udsFix},
		"dot dot": {socket: "s/../app.sock", denial: `spec.udsSocket: "s/../app.sock": "s/../app.sock" holds a ".." segment; the ` +
			`socket must lie directly inside the volume ` + udsFix},
		"absolute": {socket: "/run/app/app.sock", denial: `spec.udsSocket: "/run/app/app.sock": "/run/app/app.sock" is an absolute ` +
			`path; the value names a volume of the pod, not a path on its filesystem ` + udsFix},
		"no file": {socket: "app.sock", denial: `spec.udsSocket: "app.sock": "app.sock" names no socket file; want a volume name, a ` +
			`slash and a file name ` + udsFix},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			p := &configv1.EndpointPolicy{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "policy-" + strings.ReplaceAll(name, " ", "-")},
				Spec:       configv1.EndpointPolicySpec{TargetRef: configv1.TargetRef{Kind: configv1.KindService, Name: "echo"}, UDSSocket: tt.socket},
			}
			err := env.Client.Create(ctx, p)
			switch {
			case tt.denial == "" && err != nil:
				t.Fatalf("a valid policy was refused: %v", err)
			case tt.denial != "" && err == nil:
				t.Fatalf("policy with udsSocket %q was admitted, want denied: %s", tt.socket, tt.denial)
			case tt.denial != "" && err.Error() != deniedPolicy+tt.denial:
				t.Errorf("denial\n got %v\nwant %s", err, deniedPolicy+tt.denial)
			}
		})
	}
}

// TestEndpointPolicyTargetsServicesOnly: the CRD's schema refuses a target that is not a core
// Service, naming the field and the one value it takes.
func TestEndpointPolicyTargetsServicesOnly(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t, ctx)
	for name, tt := range map[string]struct {
		ref  configv1.TargetRef
		want string
	}{
		"a Deployment": {configv1.TargetRef{Kind: "Deployment", Name: "echo"}, `spec.targetRef.kind: Unsupported value: "Deployment": supported values: "Service"`},
		"another group": {configv1.TargetRef{Group: "apps", Kind: configv1.KindService, Name: "echo"},
			`spec.targetRef.group: Unsupported value: "apps": supported values: ""`},
	} {
		t.Run(name, func(t *testing.T) {
			p := &configv1.EndpointPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "target-" + strings.ReplaceAll(name, " ", "-")},
				Spec: configv1.EndpointPolicySpec{TargetRef: tt.ref, UDSSocket: "s/app.sock"}}
			err := env.Client.Create(ctx, p)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("creating a policy targeting %s: got %v, want an error containing %s", name, err, tt.want)
			}
		})
	}
}
