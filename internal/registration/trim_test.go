// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package registration

import (
	"maps"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aether-mesh/aether-operator/internal/portspec"
)

// fullPod is a managed pod as the API server holds it: everything the cache should not keep
// around, and the mesh's annotations among others.
func fullPod(annotations map[string]string) *corev1.Pod {
	pod := verifiedPod()
	pod.ResourceVersion = "42"
	pod.Annotations = annotations
	pod.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
	pod.OwnerReferences = []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "payments-abc"}}
	pod.Spec.Containers = []corev1.Container{{Name: "app", Image: "registry.example/app:1", Env: []corev1.EnvVar{{Name: "A", Value: "b"}}}}
	pod.Spec.Volumes = []corev1.Volume{{Name: "data"}}
	pod.Status.Phase = corev1.PodRunning
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", Ready: true}}
	return pod
}

// TestTrim: a trimmed pod verifies and parses exactly as the full one does, keeps only what
// the cache needs, and trimming is idempotent.
func TestTrim(t *testing.T) {
	annotationSets := map[string]map[string]string{
		"valid":            {portspec.AnnotationPorts: "8080,9000=tcp", portspec.AnnotationWeight: "7", portspec.AnnotationMetadataPrefix + "zone": "a", portspec.AnnotationUpstreams: "ledger"},
		"invalid":          {portspec.AnnotationPorts: "9000=tpc"},
		"typo'd key":       {portspec.AnnotationPorts: "8080,9000=tcp", "endpoint.aether.io/prots": "9999"},
		"bad upstreams":    {portspec.AnnotationPorts: "8080,9000=tcp", portspec.AnnotationUpstreams: "A,,"},
		"bad metadata key": {portspec.AnnotationPorts: "8080,9000=tcp", portspec.AnnotationMetadataPrefix + "Zone": "a"},
		"none":             nil,
	}
	unrelated := map[string]string{
		"kubectl.kubernetes.io/last-applied-configuration": `{"a huge":"blob"}`,
		"prometheus.io/scrape":                             "true", "notadomain": "x", "evil-aether.io/x": "y",
	}
	for name, mesh := range annotationSets {
		t.Run(name, func(t *testing.T) {
			all := maps.Clone(unrelated)
			maps.Copy(all, mesh)
			full := fullPod(all)
			trimmed := Trim(full)

			if !reflect.DeepEqual(trimmed.Annotations, mesh) {
				t.Errorf("annotations kept %v, want exactly the mesh's %v", trimmed.Annotations, mesh)
			}
			wantSpec, wantErr := portspec.Parse(full.Annotations)
			gotSpec, gotErr := portspec.Parse(trimmed.Annotations)
			if !reflect.DeepEqual(gotSpec, wantSpec) || !reflect.DeepEqual(gotErr, wantErr) {
				t.Errorf("the parser reads the trimmed pod differently:\n got %+v, %v\nwant %+v, %v", gotSpec, gotErr, wantSpec, wantErr)
			}
			ep := endpointOf(t, verifiedPod())
			if got, want := Verify(ep, trimmed), Verify(ep, full); got != want {
				t.Errorf("Verify differs on the trimmed pod:\n got %+v\nwant %+v", got, want)
			}
			want := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "payments-0", UID: "uid-0", ResourceVersion: "42",
					Labels: full.Labels, Annotations: mesh},
				Spec:   corev1.PodSpec{NodeName: "node-a", ServiceAccountName: "payments"},
				Status: corev1.PodStatus{PodIP: full.Status.PodIP, PodIPs: full.Status.PodIPs, Phase: full.Status.Phase},
			}
			if !reflect.DeepEqual(trimmed, want) {
				t.Errorf("trimmed\n got %+v\nwant %+v", trimmed, want)
			}
			if again := Trim(trimmed); !reflect.DeepEqual(again, trimmed) {
				t.Errorf("Trim is not idempotent:\n%+v\n%+v", again, trimmed)
			}
		})
	}
}
