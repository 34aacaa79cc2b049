// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package conditions

import (
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestSet(t *testing.T) {
	then := metav1.NewTime(time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC))
	now := metav1.NewTime(time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC))
	cond := func(typ string, status metav1.ConditionStatus, gen int64, at metav1.Time) metav1.Condition {
		return metav1.Condition{Type: typ, Status: status, Reason: "R" + typ, Message: "m", ObservedGeneration: gen, LastTransitionTime: at}
	}
	registered := cond("Registered", "True", 3, then) // another writer's: must come back untouched
	cases := map[string]struct {
		existing []metav1.Condition
		set      metav1.Condition
		want     []metav1.Condition
	}{
		"new type is appended, others kept": {
			existing: []metav1.Condition{registered},
			set:      cond("Verified", "False", 0, metav1.Time{}),
			want:     []metav1.Condition{registered, cond("Verified", "False", 7, now)},
		},
		"same status keeps its time and place": {
			existing: []metav1.Condition{cond("Verified", "True", 5, then), registered},
			set:      cond("Verified", "True", 0, metav1.Time{}),
			want:     []metav1.Condition{cond("Verified", "True", 7, then), registered},
		},
		"flip moves the time, others kept": {
			existing: []metav1.Condition{registered, cond("Verified", "True", 5, then)},
			set:      cond("Verified", "False", 0, metav1.Time{}),
			want:     []metav1.Condition{registered, cond("Verified", "False", 7, now)},
		},
		"first condition": {
			set:  cond("Verified", "True", 0, metav1.Time{}),
			want: []metav1.Condition{cond("Verified", "True", 7, now)},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			before := append([]metav1.Condition(nil), tc.existing...)
			got := Set(tc.existing, tc.set, 7, now)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
			if !reflect.DeepEqual(tc.existing, before) {
				t.Errorf("Set changed its input: %+v", tc.existing)
			}
		})
	}
}
