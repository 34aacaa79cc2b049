// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/conditions"
	"github.com/aether-mesh/aether-operator/internal/testenv"
)

// portArgs spells n consecutive ports from first, each of protocol p, for endpoint().
func portArgs(first, n int, p string) []any {
	out := make([]any, 0, 2*n)
	for i := range n {
		out = append(out, first+i, p)
	}
	return out
}

// statusWritten waits until the MeshService's status was written for total endpoints, all of
// them ready, at its current generation, and returns it.
func statusWritten(t *testing.T, ctx context.Context, ns, name string, total int32) *meshv1alpha1.MeshService {
	t.Helper()
	var ms *meshv1alpha1.MeshService
	testenv.Eventually(t, fmt.Sprintf("MeshService %s written for %d endpoints", name, total), func() (err error) {
		if ms, err = getMeshService(ctx, ns, name); err != nil {
			return err
		}
		if ms.Status.Endpoints != (meshv1alpha1.EndpointCounts{Ready: total, Total: total}) || ms.Status.ObservedGeneration != ms.Generation ||
			conditions.Find(ms.Status.Conditions, meshv1alpha1.ServiceConditionPortsComplete) == nil {
			return fmt.Errorf("endpoints %s, observedGeneration %d of %d, %d ports, conditions %d (the status write may be refused: %s)",
				ms.Status.EndpointsSummary, ms.Status.ObservedGeneration, ms.Generation, len(ms.Status.Ports), len(ms.Status.Conditions),
				condition(ms.Status.Conditions, meshv1alpha1.ServiceConditionReady).Message)
		}
		return nil
	})
	return ms
}

// TestManyPortsStatusIsWritten: services whose pods were each admitted (at most 64 ports) but
// whose union is wide — the two reproductions of the frozen status and their neighbours at and
// just over the caps — get a status the API server accepts: every endpoint counted, the summary
// cut to its limit, at most 256 ports, PortsComplete saying what was left out, with an Event.
func TestManyPortsStatusIsWritten(t *testing.T) {
	type pod struct {
		primary int
		ports   []any
	}
	tcpPods := func(n int) []pod {
		var pods []pod
		for i := range n {
			pods = append(pods, pod{10000 + 64*i, portArgs(10000+64*i, 64, "TCP")})
		}
		return pods
	}
	cases := map[string]struct {
		pods         []pod
		listed       int    // ports in status
		leftOut      int    // ports left out
		summaryTail  string // how portsSummary ends
		servicePorts int    // ports of the generated Service
	}{
		"64 31 and 21 ports": {
			pods:   []pod{{20000, portArgs(20000, 64, "HTTP")}, {21000, portArgs(21000, 31, "TCP")}, {22000, portArgs(22000, 21, "HTTP2")}},
			listed: 116, summaryTail: ",… +22 more", servicePorts: 120,
		},
		"five 64-port pods 320 ports": {pods: tcpPods(5), listed: 256, leftOut: 64, summaryTail: ",… +155 more", servicePorts: 260},
		"256 ports at the cap":        {pods: tcpPods(4), listed: 256, summaryTail: ",… +155 more", servicePorts: 260},
		"257 ports one over": {
			pods:   append(tcpPods(4), pod{10256, portArgs(10256, 1, "TCP")}),
			listed: 256, leftOut: 1, summaryTail: ",… +155 more", servicePorts: 260,
		},
		"64 TCP ports no HTTP port": {pods: []pod{{30000, portArgs(30000, 64, "TCP")}}, listed: 64, summaryTail: "30063/TCP", servicePorts: 68},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := testContext(t)
			ns := namespaceWithSA(t, ctx, "wide")
			for i, p := range tc.pods {
				endpoint(t, ctx, ns, fmt.Sprintf("wide-%d", i), "wide", healthy, int32(p.primary), p.ports...)
			}
			ms := statusWritten(t, ctx, ns, "wide", int32(len(tc.pods)))
			st := ms.Status
			if len(st.Ports) != tc.listed || !strings.HasSuffix(st.PortsSummary, tc.summaryTail) || len(st.PortsSummary) > meshv1alpha1.MaxPortsSummary {
				t.Errorf("%d ports, summary of %d bytes ending %q; want %d ending %q", len(st.Ports), len(st.PortsSummary),
					st.PortsSummary[max(0, len(st.PortsSummary)-20):], tc.listed, tc.summaryTail)
			}
			if st.Endpoints != (meshv1alpha1.EndpointCounts{Ready: int32(len(tc.pods)), Total: int32(len(tc.pods))}) {
				t.Errorf("endpoints %+v", st.Endpoints)
			}
			if want := 2*tc.listed + 10; len(st.DialSurface) != want {
				t.Errorf("%d dial rows, want %d", len(st.DialSurface), want)
			}
			for _, d := range st.DialSurface {
				if len(d.Reason) > meshv1alpha1.MaxDialReason {
					t.Errorf("dial %s: reason of %d bytes", d.Address, len(d.Reason))
				}
			}
			complete := condition(st.Conditions, meshv1alpha1.ServiceConditionPortsComplete)
			if tc.leftOut == 0 {
				if complete.Status != metav1.ConditionTrue || complete.Reason != meshv1alpha1.ServiceReasonAllPortsListed {
					t.Errorf("PortsComplete = %s/%s: %s, want True", complete.Status, complete.Reason, complete.Message)
				}
			} else {
				want := fmt.Sprintf("the endpoints declare %d distinct ports; a service lists at most 256", tc.listed+tc.leftOut)
				if complete.Status != metav1.ConditionFalse || complete.Reason != meshv1alpha1.ServiceReasonTooManyPorts ||
					!strings.Contains(complete.Message, want) || !strings.Contains(complete.Message, fmt.Sprintf("through the service (%d): ", tc.leftOut)) {
					t.Errorf("PortsComplete = %s/%s: %s\nwant False/TooManyPorts with %q", complete.Status, complete.Reason, complete.Message, want)
				}
				if note := expectEvent(t, ctx, ns, "wide", meshv1alpha1.ServiceReasonTooManyPorts); !strings.Contains(note, want) {
					t.Errorf("TooManyPorts Event %q does not say %q", note, want)
				}
			}
			svc := &corev1.Service{}
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "wide"}, svc); err != nil {
				t.Fatal(err)
			}
			if len(svc.Spec.Ports) != tc.servicePorts {
				t.Errorf("the generated Service has %d ports, want %d (the listed ports, 80, 443, 18081 and 18082)", len(svc.Spec.Ports), tc.servicePorts)
			}
		})
	}
}

// TestKubectlShowsTheDegradedSummary: kubectl get prints the cut summary in the PORTS column.
func TestKubectlShowsTheDegradedSummary(t *testing.T) {
	ctx := testContext(t)
	ns := namespaceWithSA(t, ctx, "wide")
	endpoint(t, ctx, ns, "wide-0", "wide", healthy, 20000, portArgs(20000, 64, "HTTP")...)
	endpoint(t, ctx, ns, "wide-1", "wide", healthy, 21000, portArgs(21000, 64, "HTTP")...)
	statusWritten(t, ctx, ns, "wide", 2)
	out, stderr, err := env.Kubectl(ctx, "get", "meshservice", "wide", "-n", ns)
	if err != nil {
		t.Fatalf("kubectl get: %v\n%s", err, stderr)
	}
	if !strings.Contains(out, "20000/HTTP,20001/HTTP,") || !strings.Contains(out, ",… +36 more") {
		t.Errorf("kubectl get meshservice does not show the cut summary:\n%s", out)
	}
}

// refuseStatusesWithPort installs, for namespace ns only, a ValidatingAdmissionPolicy that makes
// the API server refuse (as Invalid) any MeshService status listing port, and waits until it is
// enforced. It stands in for a status the CRD refuses: after the caps no admitted input produces
// one, and the real API server's refusal is what the safety net must handle.
func refuseStatusesWithPort(t *testing.T, ctx context.Context, ns string, port int) string {
	t.Helper()
	message := fmt.Sprintf("port %d is refused by this test's policy", port)
	invalid := metav1.StatusReasonInvalid
	fail := admissionregistrationv1.Fail
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "refuse-" + ns},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &fail,
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
					Rule: admissionregistrationv1.Rule{APIGroups: []string{meshv1alpha1.GroupVersion.Group},
						APIVersions: []string{meshv1alpha1.GroupVersion.Version}, Resources: []string{"meshservices/status"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{
				Expression: fmt.Sprintf("!has(object.status.ports) || object.status.ports.all(p, p.port != %d)", port),
				Message:    message, Reason: &invalid,
			}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "refuse-" + ns},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        policy.Name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{corev1.LabelMetadataName: ns}}},
		},
	}
	for _, o := range []client.Object{policy, binding} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), o) })
	}
	// The API server loads policies asynchronously: probe with a dry run until it refuses.
	// The probe has a ServiceAccount, so the controller keeps it (a MeshService with neither a
	// ServiceAccount nor endpoints is removed).
	if err := env.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "probe"}}); err != nil {
		t.Fatal(err)
	}
	probe := &meshv1alpha1.MeshService{}
	patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"status":{"ports":[{"port":%d,"protocol":"TCP"}]}}`, port))
	testenv.Eventually(t, "the test policy enforced", func() error {
		// Until the controller's cache has the ServiceAccount, it may remove the probe as a
		// MeshService with neither ServiceAccount nor endpoints: make it again.
		probe = &meshv1alpha1.MeshService{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "probe"}}
		if err := env.Client.Create(ctx, probe); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		err := env.Client.Status().Patch(ctx, probe, patch, client.DryRunAll)
		if err == nil || !strings.Contains(err.Error(), message) {
			return fmt.Errorf("a status with port %d is not refused yet (%v)", port, err)
		}
		return nil
	})
	return message
}

// TestRefusedStatusSurfaces: when the API server refuses the derived status, the MeshService
// keeps its last status with Ready=False StatusInvalid carrying the API server's message, a
// Warning Event says the same and the refusal is counted; retries write nothing more; when the
// input changes to one the API server accepts, the status recovers.
func TestRefusedStatusSurfaces(t *testing.T) {
	ctx := testContext(t)
	ns := namespaceWithSA(t, ctx, "refused")
	message := refuseStatusesWithPort(t, ctx, ns, 7777)
	endpoint(t, ctx, ns, "refused-0", "refused", healthy, 8080, 8080, "HTTP")
	good := serviceReady(t, ctx, ns, "refused", 1)

	refusedBefore, err := testenv.Counter("aether_controller_meshservice_status_refused_total", "reason", "Invalid")
	if err != nil {
		t.Fatal(err)
	}
	bad := endpoint(t, ctx, ns, "refused-1", "refused", healthy, 8080, 7777, "TCP", 8080, "HTTP")
	var ms *meshv1alpha1.MeshService
	testenv.Eventually(t, "Ready=False StatusInvalid", func() (err error) {
		if ms, err = getMeshService(ctx, ns, "refused"); err != nil {
			return err
		}
		if c := condition(ms.Status.Conditions, meshv1alpha1.ServiceConditionReady); c.Reason != meshv1alpha1.ServiceReasonStatusInvalid {
			return fmt.Errorf("Ready %s/%s: %s", c.Status, c.Reason, c.Message)
		}
		return nil
	})
	ready := condition(ms.Status.Conditions, meshv1alpha1.ServiceConditionReady)
	if ready.Status != metav1.ConditionFalse || !strings.Contains(ready.Message, message) || !strings.Contains(ready.Message, "the API server refused") {
		t.Errorf("Ready = %s/%s: %q, want False naming %q", ready.Status, ready.Reason, ready.Message, message)
	}
	// GitOps readers see it as failed (kstatus reads Stalled=True), and why.
	if c := condition(ms.Status.Conditions, meshv1alpha1.ServiceConditionStalled); c.Status != metav1.ConditionTrue ||
		c.Reason != meshv1alpha1.ServiceReasonStatusInvalid || !strings.Contains(c.Message, message) {
		t.Errorf("Stalled = %s/%s: %q, want True StatusInvalid naming %q", c.Status, c.Reason, c.Message, message)
	}
	if c := condition(ms.Status.Conditions, meshv1alpha1.ServiceConditionReconciling); c.Status != metav1.ConditionFalse {
		t.Errorf("Reconciling = %s/%s alongside Stalled, want False", c.Status, c.Reason)
	}
	if ms.Status.PortsSummary != good.Status.PortsSummary || ms.Status.EndpointsSummary != good.Status.EndpointsSummary {
		t.Errorf("the fallback is not the last status: ports %s endpoints %s, last %s %s", ms.Status.PortsSummary, ms.Status.EndpointsSummary,
			good.Status.PortsSummary, good.Status.EndpointsSummary)
	}
	if note := expectEvent(t, ctx, ns, "refused", meshv1alpha1.ServiceReasonStatusInvalid); !strings.Contains(note, message) || len(note) > conditions.MaxEventNote {
		t.Errorf("StatusInvalid Event (%d bytes) %q does not name %q", len(note), note, message)
	}
	if n, _ := testenv.Counter("aether_controller_meshservice_status_refused_total", "reason", "Invalid"); n <= refusedBefore {
		t.Errorf("refusals counted %v, before %v", n, refusedBefore)
	}
	out, _, err := env.Kubectl(ctx, "describe", "meshservice", "refused", "-n", ns)
	if err != nil || !strings.Contains(out, "StatusInvalid") || !strings.Contains(strings.Join(strings.Fields(out), " "), message) {
		t.Errorf("kubectl describe does not show the refusal (%v):\n%s", err, out)
	}

	// Reconciling again (the refused status is still the derived one) writes nothing more.
	rv := ms.ResourceVersion
	before := reconciles(t)
	touchServiceAccount(t, ctx, ns, "refused")
	testenv.Eventually(t, "another reconcile", func() error {
		if n := reconciles(t) - before; n < 1 {
			return fmt.Errorf("%v reconciles", n)
		}
		return nil
	})
	if ms, _ = getMeshService(ctx, ns, "refused"); ms.ResourceVersion != rv {
		t.Errorf("a reconcile of the same refused status wrote again: resourceVersion %s → %s", rv, ms.ResourceVersion)
	}

	// The pod stops declaring 7777: the derived status is accepted and replaces the fallback.
	testenv.Eventually(t, "dropping port 7777", func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(bad), bad); err != nil {
			return err
		}
		bad.Spec.Ports = bad.Spec.Ports[1:]
		bad.Spec.PortsSummary = meshv1alpha1.FormatPorts(bad.Spec.Ports)
		// The pod first, then its endpoint, as its agent would: an endpoint counts only while it
		// matches its pod's annotations.
		pod := &corev1.Pod{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(bad), pod); err != nil {
			return err
		}
		pod.Annotations = declaring(bad.Spec.PrimaryPort, bad.Spec.Ports)
		if err := env.Client.Update(ctx, pod); err != nil {
			return err
		}
		return env.Client.Update(ctx, bad)
	})
	serviceReady(t, ctx, ns, "refused", 2)
}

func touchServiceAccount(t *testing.T, ctx context.Context, ns, name string) {
	t.Helper()
	testenv.Eventually(t, "labelling the ServiceAccount", func() error {
		sa := &corev1.ServiceAccount{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, sa); err != nil {
			return err
		}
		sa.Labels = map[string]string{"touched": sa.ResourceVersion}
		return env.Client.Update(ctx, sa)
	})
}
