// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package meshservice_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/meshservice"
)

// TestAdoptable: the rule that decides whether a user's Service of the service's name is used
// read-only, one case per clause, each from a compatible Service changed in one way.
func TestAdoptable(t *testing.T) {
	pod := func(name, sa string, labels map[string]string, phase corev1.PodPhase) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, Labels: labels},
			Spec: corev1.PodSpec{ServiceAccountName: sa}, Status: corev1.PodStatus{Phase: phase}}
	}
	web := map[string]string{"app": "web"}
	endpoints := []meshv1alpha1.MeshEndpoint{{Spec: meshv1alpha1.MeshEndpointSpec{PodName: "web-0"}}}
	service := func(edit func(*corev1.Service)) *corev1.Service {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: "10.96.0.7", Selector: web}}
		if edit != nil {
			edit(svc)
		}
		return svc
	}
	mine := []corev1.Pod{pod("web-0", "web", web, corev1.PodRunning)}
	for name, tc := range map[string]struct {
		svc  *corev1.Service
		pods []corev1.Pod
		want string // "" when adoptable, else a part of the reason
	}{
		"compatible":               {service(nil), mine, ""},
		"type unset is ClusterIP":  {service(func(s *corev1.Service) { s.Spec.Type = "" }), mine, ""},
		"a finished pod of others": {service(nil), append(mine, pod("job-1", "batch", web, corev1.PodSucceeded)), ""},
		"an unmeshed pod of the same ServiceAccount (a rollout)": {service(nil),
			append(mine, pod("web-old", "web", web, corev1.PodRunning)), ""},
		"a pod of another namespace is not looked at": {service(nil),
			append(mine, corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "x", Labels: web}}), ""},
		"another ServiceAccount's pod": {service(nil), append(mine, pod("intruder", "intruder", web, corev1.PodRunning)),
			"also selects pods not of this service: 1, for example pod intruder running as ServiceAccount intruder"},
		"a pod running as default": {service(nil), append(mine, pod("stray", "", web, corev1.PodPending)),
			"pod stray running as ServiceAccount default"},
		"an endpoint not selected": {service(func(s *corev1.Service) { s.Spec.Selector = map[string]string{"app": "other"} }), mine,
			"its selector app=other does not select pod web-0"},
		"no selector":  {service(func(s *corev1.Service) { s.Spec.Selector = nil }), mine, "it has no selector"},
		"headless":     {service(func(s *corev1.Service) { s.Spec.ClusterIP = corev1.ClusterIPNone }), mine, "it is headless"},
		"ExternalName": {service(func(s *corev1.Service) { s.Spec.Type, s.Spec.ClusterIP = corev1.ServiceTypeExternalName, "" }), mine, "ExternalName"},
		"NodePort":     {service(func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeNodePort }), mine, "it is of type NodePort"},
		"LoadBalancer": {service(func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeLoadBalancer }), mine, "it is of type LoadBalancer"},
	} {
		t.Run(name, func(t *testing.T) {
			got := meshservice.Adoptable("web", meshservice.ExistingServiceOf(tc.svc, tc.pods), endpoints)
			switch {
			case tc.want == "" && got != "":
				t.Errorf("not adoptable: %s", got)
			case tc.want != "" && !strings.Contains(got, tc.want):
				t.Errorf("reason %q, want it to contain %q", got, tc.want)
			}
		})
	}
}
