// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package registration

import (
	"errors"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/portspec"
)

func TestRegistrationUnit(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{LabelRegion: "r", LabelZone: "z"}}}
	pod := func(annotations map[string]string, ip, sa string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "p", UID: "u", Annotations: annotations},
			Spec:       corev1.PodSpec{NodeName: "n", ServiceAccountName: sa},
			Status:     corev1.PodStatus{PodIP: ip},
		}
	}
	t.Run("defaults, the default ServiceAccount, locality", func(t *testing.T) {
		got, err := Registration(pod(nil, "127.0.0.5", ""), node)
		if err != nil {
			t.Fatal(err)
		}
		want := meshv1alpha1.MeshEndpointSpec{
			ServiceName: "default", PodName: "p", PodUID: "u", NodeName: "n", Address: "127.0.0.5", PrimaryPort: 8080,
			Ports: []meshv1alpha1.PortProtocol{{Port: 8080, Protocol: meshv1alpha1.ProtocolHTTP}}, PortsSummary: "8080/HTTP",
			Weight: 1024, HealthCheck: meshv1alpha1.HealthCheck{Mode: "eds", Path: "/"}, Locality: meshv1alpha1.Locality{Region: "r", Zone: "z"},
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("got  %+v\nwant %+v", got, want)
		}
	})
	t.Run("no Node yet: no locality", func(t *testing.T) {
		got, err := Registration(pod(nil, "127.0.0.5", "payments"), nil)
		if err != nil || got.Locality != (meshv1alpha1.Locality{}) || got.ServiceName != "payments" {
			t.Errorf("got %+v, %v", got, err)
		}
	})
	t.Run("no IP", func(t *testing.T) {
		if _, err := Registration(pod(nil, "", "payments"), node); !errors.Is(err, ErrNoAddress) {
			t.Errorf("got %v, want ErrNoAddress", err)
		}
	})
	t.Run("a parse error is the parser's", func(t *testing.T) {
		_, err := Registration(pod(map[string]string{portspec.AnnotationPorts: "9000=tpc"}, "127.0.0.5", "payments"), node)
		var list portspec.ErrorList
		if !errors.As(err, &list) || list[0].Kind != portspec.KindUnknownSuffix {
			t.Errorf("got %v, want a portspec.ErrorList of UnknownSuffix", err)
		}
	})
}
