// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package webhook

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/aether-mesh/aether-operator/internal/portspec"
)

// udsPod is a managed pod annotated with socket (none when empty), with volumes, and fsGroup
// when set.
func udsPod(ns, socket string, fsGroup *int64, volumes ...corev1.Volume) *corev1.Pod {
	annotations := map[string]string{}
	if socket != "" {
		annotations[portspec.AnnotationUDSSocket] = socket
	}
	p := pod(ns, true, annotations)
	p.Spec.Volumes = volumes
	if fsGroup != nil {
		p.Spec.SecurityContext = &corev1.PodSecurityContext{FSGroup: fsGroup}
	}
	return p
}

func csiVolume(name string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: "csi.aether.io"}}}
}

func emptyDirVolume(name string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
}

// TestUDSAdmission: every socket delivery admission can judge from the pod is denied with a
// message naming the field, the value and the fix; the documented pod is admitted.
func TestUDSAdmission(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t, ctx)
	gid := new(int64(65532))
	long := strings.Repeat("a", 55)
	const segmentsFix = `(write <volume>/<socket-file>: the name of the pod's csi.aether.io volume (not its mount path) and a file ` +
		`directly inside it, for example "uds/app.sock")`
	const carrierFix = `(declare it as an inline csi: {driver: csi.aether.io} volume, the only socket carrier, and mount it where ` +
		`the app binds its socket)`
	tests := map[string]struct {
		pod    *corev1.Pod
		denial string // empty: admitted
	}{
		"documented pod":                    {pod: udsPod(ns, "uds/app.sock", gid, csiVolume("uds"))},
		"csi volume without the annotation": {pod: udsPod(ns, "", gid, csiVolume("uds"))},
		"emptyDir": {pod: udsPod(ns, "uds/app.sock", gid, emptyDirVolume("uds")),
			denial: `endpoint.aether.io/uds-socket: "uds/app.sock": volume "uds" is an emptyDir (no longer a socket carrier), not a ` +
				`csi.aether.io volume ` + carrierFix},
		"another csi driver": {pod: udsPod(ns, "uds/app.sock", gid, corev1.Volume{Name: "uds", VolumeSource: corev1.VolumeSource{
			CSI: &corev1.CSIVolumeSource{Driver: "csi.spiffe.io"}}}),
			denial: `endpoint.aether.io/uds-socket: "uds/app.sock": volume "uds" is a csi volume of driver "csi.spiffe.io", not a ` +
				`csi.aether.io volume ` + carrierFix},
		"volume not declared": {pod: udsPod(ns, "sock/app.sock", gid, csiVolume("uds")),
			denial: `endpoint.aether.io/uds-socket: "sock/app.sock": the pod declares no volume "sock" (name the pod's csi.aether.io ` +
				`volume, or add a volume "sock": declare it as an inline csi: {driver: csi.aether.io} volume, the only socket carrier, ` +
				`and mount it where the app binds its socket)`},
		"file over budget": {pod: udsPod(ns, "uds/"+long, gid, csiVolume("uds")),
			denial: `endpoint.aether.io/uds-socket: "uds/` + long + `": socket file name "` + long + `" is 55 bytes long, over its ` +
				`budget of 54 bytes: the node path /run/aether/uds/<pod UID>/<file> must fit the 107 bytes of a Unix socket address ` +
				`(shorten the socket file name to at most 54 bytes (the volume name costs nothing))`},
		"extra path segments": {pod: udsPod(ns, "uds/run/app.sock", gid, csiVolume("uds")),
			denial: `endpoint.aether.io/uds-socket: "uds/run/app.sock": "uds/run/app.sock" has 3 path segments; want exactly two, ` +
				`the volume and a file directly inside it (no subdirectories) ` + segmentsFix},
		"dot dot": {pod: udsPod(ns, "uds/../app.sock", gid, csiVolume("uds")),
			denial: `endpoint.aether.io/uds-socket: "uds/../app.sock": "uds/../app.sock" holds a ".." segment; the socket must lie ` +
				`directly inside the volume ` + segmentsFix},
		"absolute": {pod: udsPod(ns, "/run/app/app.sock", gid, csiVolume("uds")),
			denial: `endpoint.aether.io/uds-socket: "/run/app/app.sock": "/run/app/app.sock" is an absolute path; the value names a ` +
				`volume of the pod, not a path on its filesystem ` + segmentsFix},
		"no fsGroup": {pod: udsPod(ns, "uds/app.sock", nil, csiVolume("uds")),
			denial: `spec.securityContext.fsGroup: unset, and volume "uds" is a csi.aether.io volume, whose socket directory the ` +
				`fsGroup owns (set spec.securityContext.fsGroup to a group the app runs with, for example 65532; there is no ` +
				`world-writable fallback)`},
		"no fsGroup, no annotation": {pod: udsPod(ns, "", nil, csiVolume("uds")),
			denial: `spec.securityContext.fsGroup: unset, and volume "uds" is a csi.aether.io volume, whose socket directory the ` +
				`fsGroup owns (set spec.securityContext.fsGroup to a group the app runs with, for example 65532; there is no ` +
				`world-writable fallback)`},
		"two csi volumes": {pod: udsPod(ns, "uds/app.sock", gid, csiVolume("uds"), csiVolume("more")),
			denial: `spec.volumes: ["uds" "more"] are all csi.aether.io volumes; a pod has at most one (keep one, mount it into ` +
				`every container that needs the socket, and name it in endpoint.aether.io/uds-socket)`},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			err := env.Client.Create(ctx, tt.pod)
			switch {
			case tt.denial == "" && err != nil:
				t.Fatalf("the pod was refused: %v", err)
			case tt.denial != "" && err == nil:
				t.Fatalf("the pod was admitted, want denied: %s", tt.denial)
			case tt.denial != "" && err.Error() != denied+tt.denial:
				t.Errorf("denial\n got %v\nwant %s", err, denied+tt.denial)
			}
		})
	}
}
