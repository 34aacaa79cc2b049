// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package registration

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/aether-mesh/aether-operator/internal/portspec"
)

const testUID = "0b7f1f0e-5c1d-4a8e-9d7e-3f2a1b0c9d8e"

func udsTestPod(fsGroup bool, volumes ...corev1.Volume) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "echo-1", UID: types.UID(testUID)},
		Spec: corev1.PodSpec{Volumes: volumes}}
	if fsGroup {
		p.Spec.SecurityContext = &corev1.PodSecurityContext{FSGroup: new(int64(65532))}
	}
	return p
}

func csi(name, driver string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: driver}}}
}

func emptyDir(name string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
}

// TestResolveUDS: the annotation wins over a policy; every reason of the workload page is
// reached, and a refusal leaves the pod on TCP (no path).
func TestResolveUDS(t *testing.T) {
	good := udsTestPod(true, csi("uds", UDSDriver))
	annotated := &portspec.UDSSocket{Volume: "uds", File: "app.sock"}
	noUID := udsTestPod(true, csi("uds", UDSDriver))
	noUID.UID = ""
	tests := map[string]struct {
		pod    *corev1.Pod
		in     UDSInputs
		path   string
		reason UDSReason
	}{
		"nothing declared": {pod: good, in: UDSInputs{Enabled: true, Root: portspec.UDSHostRoot}},
		"annotation": {pod: good, in: UDSInputs{Enabled: true, Root: portspec.UDSHostRoot, Annotated: annotated},
			path: "/run/aether/uds/" + testUID + "/app.sock"},
		"annotation wins over the policy": {pod: good, in: UDSInputs{Enabled: true, Root: portspec.UDSHostRoot, Annotated: annotated,
			Policy: "uds/policy.sock", PolicyName: "echo-uds"}, path: "/run/aether/uds/" + testUID + "/app.sock"},
		"policy": {pod: good, in: UDSInputs{Enabled: true, Root: portspec.UDSHostRoot, Policy: "uds/policy.sock", PolicyName: "echo-uds"},
			path: "/run/aether/uds/" + testUID + "/policy.sock"},
		"disabled": {pod: good, in: UDSInputs{Root: portspec.UDSHostRoot, Annotated: annotated}, reason: UDSDisabled},
		"not csi": {pod: udsTestPod(true, emptyDir("uds")), in: UDSInputs{Enabled: true, Root: portspec.UDSHostRoot, Annotated: annotated},
			reason: UDSNotCSI},
		"volume not declared": {pod: good, in: UDSInputs{Enabled: true, Root: portspec.UDSHostRoot, Policy: "s/app.sock", PolicyName: "p"},
			reason: UDSVolumeNotDeclared},
		"bad file": {pod: good, in: UDSInputs{Enabled: true, Root: portspec.UDSHostRoot, Policy: "uds/a/b.sock", PolicyName: "p"},
			reason: UDSBadFile},
		"file over budget": {pod: good, in: UDSInputs{Enabled: true, Root: portspec.UDSHostRoot, Policy: "uds/" + strings.Repeat("f", 55),
			PolicyName: "p"}, reason: UDSPathTooLong},
		"root too long": {pod: good, in: UDSInputs{Enabled: true, Root: "/var/lib/somewhere/much/longer", Annotated: &portspec.UDSSocket{
			Volume: "uds", File: strings.Repeat("f", 54)}}, reason: UDSPathTooLong},
		"two csi volumes": {pod: udsTestPod(true, csi("uds", UDSDriver), csi("more", UDSDriver)),
			in: UDSInputs{Enabled: true, Root: portspec.UDSHostRoot, Annotated: annotated}, reason: UDSMultipleCSIVolumes},
		"no fsGroup": {pod: udsTestPod(false, csi("uds", UDSDriver)), in: UDSInputs{Enabled: true, Root: portspec.UDSHostRoot, Annotated: annotated},
			reason: UDSBadRequest},
		"no uid": {pod: noUID, in: UDSInputs{Enabled: true, Root: portspec.UDSHostRoot, Annotated: annotated}, reason: UDSNoUID},
	}
	reached := map[UDSReason]bool{}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			d, err := ResolveUDS(tt.pod, tt.in)
			var refused *UDSError
			switch {
			case tt.reason == "" && err != nil:
				t.Fatalf("ResolveUDS: %v", err)
			case tt.reason != "" && !errors.As(err, &refused):
				t.Fatalf("ResolveUDS = %+v, %v; want a refusal %s", d, err, tt.reason)
			case tt.reason != "" && refused.Reason != tt.reason:
				t.Errorf("reason = %s, want %s: %v", refused.Reason, tt.reason, err)
			}
			if tt.reason != "" {
				reached[tt.reason] = true
			}
			if d.Path != tt.path {
				t.Errorf("path = %q, want %q", d.Path, tt.path)
			}
		})
	}
	for _, r := range AllUDSReasons() {
		if !reached[r] {
			t.Errorf("no row reaches reason %s", r)
		}
	}
}
