// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package meshservice_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/conditions"
	"github.com/aether-mesh/aether-operator/internal/meshservice"
)

const vip = "10.96.0.10"

// converged is the Service the API server holds after the controller created the generated
// Service of baseInput with a healthy 8080/HTTP, 9000/TCP endpoint.
func converged(t *testing.T) (*corev1.Service, meshservice.Output) {
	t.Helper()
	out := mustTranslate(t, baseInput(endpoint(t, "payments-0", "2026-05-01T09:00:00Z", 8080, meshv1alpha1.HealthHealthy, "8080/HTTP", "9000/TCP")))
	created, err := meshservice.ServiceToWrite(nil, out.Service)
	if err != nil {
		t.Fatal(err)
	}
	// What the API server adds on create: the allocation and the metadata it owns.
	created.UID, created.ResourceVersion = "svc-uid", "41"
	created.Spec.ClusterIP, created.Spec.ClusterIPs = vip, []string{vip}
	created.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol}
	return created, out
}

// TestServiceToWrite: whatever a user changed in the generated Service, the Service to write is
// the generated one with the live VIP, and a converged Service needs no write.
func TestServiceToWrite(t *testing.T) {
	pristine, out := converged(t)
	if got, err := meshservice.ServiceToWrite(pristine, out.Service); err != nil || !equality.Semantic.DeepEqual(got, pristine) {
		t.Fatalf("a converged Service needs a write (err %v):\nlive %+v\nwant %+v", err, pristine.Spec, got.Spec)
	}

	cases := map[string]struct {
		mutate func(*corev1.Service)
		vip    string // the cluster IP of the Service to write: "" when the API server allocates a new one
	}{
		"selector":     {mutate: func(s *corev1.Service) { s.Spec.Selector = map[string]string{"app": "evil"} }, vip: vip},
		"external IPs": {mutate: func(s *corev1.Service) { s.Spec.ExternalIPs = []string{"192.0.2.10"} }, vip: vip},
		"session affinity": {mutate: func(s *corev1.Service) {
			s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
			s.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: new(int32(10800))}}
		}, vip: vip},
		"load balancer with everything": {mutate: func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeLoadBalancer
			s.Spec.LoadBalancerIP, s.Spec.LoadBalancerSourceRanges = "192.0.2.20", []string{"192.0.2.0/24"}
			s.Spec.LoadBalancerClass, s.Spec.AllocateLoadBalancerNodePorts = new("example.com/lb"), new(true)
			s.Spec.ExternalTrafficPolicy, s.Spec.HealthCheckNodePort = corev1.ServiceExternalTrafficPolicyLocal, 31000
			for i := range s.Spec.Ports {
				s.Spec.Ports[i].NodePort = 30000 + int32(i)
			}
		}, vip: vip},
		"traffic fields": {mutate: func(s *corev1.Service) {
			s.Spec.PublishNotReadyAddresses, s.Spec.TrafficDistribution = true, new(corev1.ServiceTrafficDistributionPreferClose)
			s.Spec.InternalTrafficPolicy = new(corev1.ServiceInternalTrafficPolicyLocal)
		}, vip: vip},
		"dual stack": {mutate: func(s *corev1.Service) {
			s.Spec.IPFamilyPolicy = new(corev1.IPFamilyPolicyPreferDualStack)
			s.Spec.IPFamilies = append(s.Spec.IPFamilies, corev1.IPv6Protocol)
			s.Spec.ClusterIPs = append(s.Spec.ClusterIPs, "fd00::10")
		}, vip: vip},
		"ports renumbered, removed, added, retargeted": {mutate: func(s *corev1.Service) {
			s.Spec.Ports[2].Port = 8081
			s.Spec.Ports = append(s.Spec.Ports[:3], s.Spec.Ports[4:]...)
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "evil", Port: 7777, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromString("x")})
			s.Spec.Ports[0].TargetPort = intstr.FromInt32(9999)
		}, vip: vip},
		// The API server released the cluster IP on the change to ExternalName: a new one is
		// allocated when the Service becomes ClusterIP again.
		"external name": {mutate: func(s *corev1.Service) {
			s.Spec.Type, s.Spec.ExternalName = corev1.ServiceTypeExternalName, "attacker.example.com"
			s.Spec.ClusterIP, s.Spec.ClusterIPs, s.Spec.IPFamilies, s.Spec.IPFamilyPolicy = "", nil, nil, nil
		}, vip: ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			live := pristine.DeepCopy()
			tc.mutate(live)
			got, err := meshservice.ServiceToWrite(live, out.Service)
			if err != nil {
				t.Fatal(err)
			}
			want := pristine.Spec.DeepCopy()
			if tc.vip == "" {
				want.ClusterIP, want.ClusterIPs, want.IPFamilies = "", nil, nil
			}
			if !equality.Semantic.DeepEqual(got.Spec, *want) {
				t.Errorf("spec to write:\n%+v\nwant\n%+v", got.Spec, *want)
			}
			if got.ResourceVersion != live.ResourceVersion || got.UID != live.UID {
				t.Errorf("resourceVersion %s uid %s, want the live one's (%s %s): the write must be an update of what was read",
					got.ResourceVersion, got.UID, live.ResourceVersion, live.UID)
			}
			if equality.Semantic.DeepEqual(live, got) {
				t.Error("the changed Service counts as converged")
			}
		})
	}
}

// TestServiceToWriteMetadata: the generated labels, annotations and owner reference are
// restored, a stale or second controller reference is dropped, and what others added that does
// not route traffic (their labels, annotations, a non-controller reference) is kept.
func TestServiceToWriteMetadata(t *testing.T) {
	pristine, out := converged(t)
	mesh := pristine.OwnerReferences[0]
	stale := *mesh.DeepCopy()
	stale.UID = "old-meshservice-uid"
	foreign := metav1.OwnerReference{APIVersion: "example.com/v1", Kind: "Team", Name: "t", UID: "team-uid"}
	foreignController := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "d", UID: "d-uid", Controller: new(true)}

	live := pristine.DeepCopy()
	live.Labels = map[string]string{"team": "payments"}
	live.Annotations[meshservice.AnnotationPortProtocols] = "8080=tcp"
	live.Annotations["note"] = "kept"
	live.OwnerReferences = []metav1.OwnerReference{stale, foreign, foreignController}

	got, err := meshservice.ServiceToWrite(live, out.Service)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"team": "payments", meshservice.LabelGenerated: "true"}; !equality.Semantic.DeepEqual(got.Labels, want) {
		t.Errorf("labels %v, want %v", got.Labels, want)
	}
	if got.Annotations[meshservice.AnnotationPortProtocols] != "8080=http,9000=tcp" || got.Annotations["note"] != "kept" {
		t.Errorf("annotations %v", got.Annotations)
	}
	if want := []metav1.OwnerReference{foreign, mesh}; !equality.Semantic.DeepEqual(got.OwnerReferences, want) {
		t.Errorf("ownerReferences %+v\nwant %+v", got.OwnerReferences, want)
	}
}

// TestServiceToWriteCreates: with no live Service the generated one is written as is: no cluster
// IP (the API server allocates it), nothing but the generated fields.
func TestServiceToWriteCreates(t *testing.T) {
	out := mustTranslate(t, baseInput(endpoint(t, "payments-0", "2026-05-01T09:00:00Z", 8080, meshv1alpha1.HealthHealthy, "8080/HTTP")))
	got, err := meshservice.ServiceToWrite(nil, out.Service)
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != "payments" || got.Namespace != "shop" || got.ResourceVersion != "" || got.Spec.ClusterIP != "" ||
		got.Spec.Type != corev1.ServiceTypeClusterIP || got.Spec.Selector != nil || len(got.Spec.Ports) != 5 {
		t.Errorf("Service to create: %+v", got)
	}
}

// TestIsGenerated: the mesh's Service is recognised by its owner reference, or by the label AND
// the controller's field manager together; never by the label alone.
func TestIsGenerated(t *testing.T) {
	const owner types.UID = "ms-uid"
	ref := func(uid types.UID) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: "mesh.aether.io/v1alpha1", Kind: "MeshService", Name: "payments", UID: uid}}
	}
	label := map[string]string{meshservice.LabelGenerated: "true"}
	managedBy := func(manager string) []metav1.ManagedFieldsEntry {
		return []metav1.ManagedFieldsEntry{{Manager: manager, Operation: metav1.ManagedFieldsOperationApply}}
	}
	cases := map[string]struct {
		meta metav1.ObjectMeta
		want bool
	}{
		"owner reference":                        {meta: metav1.ObjectMeta{OwnerReferences: ref(owner)}, want: true},
		"label and field manager, no reference":  {meta: metav1.ObjectMeta{Labels: label, ManagedFields: managedBy("aether-controller")}, want: true},
		"label and field manager, stale owner":   {meta: metav1.ObjectMeta{Labels: label, ManagedFields: managedBy("aether-controller"), OwnerReferences: ref("old")}, want: true},
		"label only":                             {meta: metav1.ObjectMeta{Labels: label, ManagedFields: managedBy("kubectl-client-side-apply")}, want: false},
		"label and a stale owner, user's writes": {meta: metav1.ObjectMeta{Labels: label, ManagedFields: managedBy("kubectl-edit"), OwnerReferences: ref("old")}, want: false},
		"field manager only":                     {meta: metav1.ObjectMeta{ManagedFields: managedBy("aether-controller")}, want: false},
		"label false":                            {meta: metav1.ObjectMeta{Labels: map[string]string{meshservice.LabelGenerated: "false"}, ManagedFields: managedBy("aether-controller")}, want: false},
		"nothing":                                {want: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := meshservice.IsGenerated(&corev1.Service{ObjectMeta: tc.meta}, owner, "aether-controller"); got != tc.want {
				t.Errorf("IsGenerated = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestWriteFailedCondition: the API server's answer is in the message, cut to the limit.
func TestWriteFailedCondition(t *testing.T) {
	for _, refusal := range []string{`services "payments" is forbidden: frozen`, strings.Repeat("é", conditions.MaxConditionMessage)} {
		c := meshservice.WriteFailedCondition("shop", "payments", refusal)
		if c.Type != meshv1alpha1.ServiceConditionServiceReady || c.Status != metav1.ConditionFalse || c.Reason != meshv1alpha1.ServiceReasonServiceWriteFailed {
			t.Errorf("condition %s %s %s", c.Type, c.Status, c.Reason)
		}
		if len(c.Message) > conditions.MaxConditionMessage || !strings.Contains(c.Message, "shop/payments") ||
			!strings.Contains(c.Message, refusal[:min(len(refusal), 100)]) {
			t.Errorf("message of %d bytes: %.200s", len(c.Message), c.Message)
		}
	}
}
