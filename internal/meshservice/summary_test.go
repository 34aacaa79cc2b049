// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package meshservice_test

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/conditions"
	"github.com/aether-mesh/aether-operator/internal/meshservice"
)

func cond(t string, ok bool, reason string) metav1.Condition {
	s := metav1.ConditionFalse
	if ok {
		s = metav1.ConditionTrue
	}
	return metav1.Condition{Type: t, Status: s, Reason: reason, Message: reason + " message"}
}

// TestWithSummary: Reconciling and Stalled, the conditions kstatus reads, from every condition
// that can be False, alone and together.
func TestWithSummary(t *testing.T) {
	ready := cond(meshv1alpha1.ServiceConditionReady, true, meshv1alpha1.ServiceReasonEndpointsReady)
	agree := cond(meshv1alpha1.ServiceConditionPortsConsistent, true, meshv1alpha1.ServiceReasonPortsAgree)
	applied := cond(meshv1alpha1.ServiceConditionServiceReady, true, meshv1alpha1.ServiceReasonServiceApplied)
	complete := cond(meshv1alpha1.ServiceConditionPortsComplete, true, meshv1alpha1.ServiceReasonAllPortsListed)
	noReady := cond(meshv1alpha1.ServiceConditionReady, false, meshv1alpha1.ServiceReasonNoReadyEndpoints)
	noEndpoints := cond(meshv1alpha1.ServiceConditionReady, false, meshv1alpha1.ServiceReasonNoEndpoints)
	statusInvalid := cond(meshv1alpha1.ServiceConditionReady, false, meshv1alpha1.ServiceReasonStatusInvalid)
	conflict := cond(meshv1alpha1.ServiceConditionPortsConsistent, false, meshv1alpha1.ServiceReasonProtocolConflict)
	nameConflict := cond(meshv1alpha1.ServiceConditionServiceReady, false, meshv1alpha1.ServiceReasonNameConflict)
	writeFailed := cond(meshv1alpha1.ServiceConditionServiceReady, false, meshv1alpha1.ServiceReasonServiceWriteFailed)
	tooMany := cond(meshv1alpha1.ServiceConditionPortsComplete, false, meshv1alpha1.ServiceReasonTooManyPorts)

	cases := map[string]struct {
		in                []metav1.Condition
		reconciling       bool
		stalled           bool
		reason            string // of the True one, or of Reconciling when neither is
		messageNamesCause []string
	}{
		"settled":                      {in: []metav1.Condition{ready, agree, applied, complete}, reason: meshv1alpha1.ServiceReasonSettled},
		"no ready endpoints":           {in: []metav1.Condition{noReady, agree, applied, complete}, reconciling: true, reason: meshv1alpha1.ServiceReasonNoReadyEndpoints},
		"no endpoints":                 {in: []metav1.Condition{noEndpoints, agree, applied, complete}, reconciling: true, reason: meshv1alpha1.ServiceReasonNoEndpoints},
		"protocol conflict":            {in: []metav1.Condition{ready, conflict, applied, complete}, reconciling: true, reason: meshv1alpha1.ServiceReasonProtocolConflict},
		"pending and conflicting":      {in: []metav1.Condition{noReady, conflict, applied, complete}, reconciling: true, reason: meshv1alpha1.ServiceReasonNoReadyEndpoints, messageNamesCause: []string{"NoReadyEndpoints message", "ProtocolConflict message"}},
		"name conflict":                {in: []metav1.Condition{ready, agree, nameConflict, complete}, stalled: true, reason: meshv1alpha1.ServiceReasonNameConflict},
		"service write failed":         {in: []metav1.Condition{ready, agree, writeFailed, complete}, stalled: true, reason: meshv1alpha1.ServiceReasonServiceWriteFailed},
		"status invalid":               {in: []metav1.Condition{statusInvalid, agree, applied, complete}, stalled: true, reason: meshv1alpha1.ServiceReasonStatusInvalid},
		"too many ports":               {in: []metav1.Condition{ready, agree, applied, tooMany}, stalled: true, reason: meshv1alpha1.ServiceReasonTooManyPorts},
		"stalled wins over pending":    {in: []metav1.Condition{noReady, conflict, nameConflict, complete}, stalled: true, reason: meshv1alpha1.ServiceReasonNameConflict, messageNamesCause: []string{"NameConflict message"}},
		"every blocking cause is told": {in: []metav1.Condition{ready, agree, nameConflict, tooMany}, stalled: true, reason: meshv1alpha1.ServiceReasonNameConflict, messageNamesCause: []string{"NameConflict message", "TooManyPorts message"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			out := meshservice.WithSummary(tc.in)
			// Idempotent: a caller that changes a condition after Translate calls it again.
			if again := meshservice.WithSummary(out); len(again) != len(out) {
				t.Fatalf("WithSummary twice: %d conditions, once: %d", len(again), len(out))
			}
			if len(out) != len(tc.in)+2 {
				t.Fatalf("%d conditions, want the %d given and Reconciling, Stalled", len(out), len(tc.in))
			}
			reconciling := conditions.Find(out, meshv1alpha1.ServiceConditionReconciling)
			stalled := conditions.Find(out, meshv1alpha1.ServiceConditionStalled)
			if (reconciling.Status == metav1.ConditionTrue) != tc.reconciling || (stalled.Status == metav1.ConditionTrue) != tc.stalled {
				t.Fatalf("Reconciling=%s %s, Stalled=%s %s; want reconciling %v, stalled %v",
					reconciling.Status, reconciling.Reason, stalled.Status, stalled.Reason, tc.reconciling, tc.stalled)
			}
			decided := reconciling
			if tc.stalled {
				decided = stalled
			}
			if decided.Reason != tc.reason {
				t.Errorf("%s reason %s, want %s", decided.Type, decided.Reason, tc.reason)
			}
			for _, want := range append(tc.messageNamesCause, tc.reason) {
				if (tc.reconciling || tc.stalled) && !strings.Contains(decided.Message, want) {
					t.Errorf("%s message %q does not name %q", decided.Type, decided.Message, want)
				}
			}
		})
	}
}
