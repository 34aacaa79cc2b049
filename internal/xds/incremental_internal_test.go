// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xds

import (
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/xds/xdstest"
)

// projectionDisagreements changes each field of each selected service of the scenarios, one at a
// time (Changes), and returns a line for each change where compare (a selected service against
// the projection of the unchanged one) disagrees with the projections themselves (deeply equal
// or not), and how many changes changed the projection.
func projectionDisagreements(t *testing.T, compare func(s, p meshService) bool) (lines []string, changed int) {
	t.Helper()
	scenarios := xdstest.All()
	for _, name := range slices.Sorted(maps.Keys(scenarios)) {
		in, err := selectInputs(scenarios[name], nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range in.services {
			p := project(s)
			if !compare(s, p) {
				lines = append(lines, name+": "+s.key+": unchanged, yet not the same as its own projection")
			}
			for _, c := range Changes(&s) {
				s2 := DeepCopy(s)
				c.Apply(&s2)
				same := reflect.DeepEqual(project(s2), p)
				if !same {
					changed++
				}
				if compare(s2, p) != same {
					lines = append(lines, name+": "+s.key+": "+c.String()+": the projection "+
						map[bool]string{true: "is the same", false: "differs"}[same]+", the comparison says otherwise")
				}
			}
		}
	}
	return lines, changed
}

// project is s's projection (listeningInputs).
func project(s meshService) meshService {
	return listeningInputs(listenerInputs{services: []meshService{s}}).services[0]
}

// TestProjectsToSeesEveryField: the listeners and routes are reused when every selected service
// still projects to what they were built from (projectsTo, field by field, for speed); the
// projection itself is what they read. For every change of one field of a selected service
// (found by reflection, so a field added later is changed too), projectsTo must agree with the
// projections: "the same" exactly when they are deeply equal. A field the projection keeps and
// projectsTo skips would reuse stale listeners (a silent misroute). The negative control skips
// the VIP and is caught.
func TestProjectsToSeesEveryField(t *testing.T) {
	lines, changed := projectionDisagreements(t, projectsTo)
	for _, l := range lines {
		t.Error(l)
	}
	if changed == 0 {
		t.Fatal("no change changed a projection: the comparison proves nothing")
	}
	t.Logf("%d changes of one field changed a projection; projectsTo saw each", changed)

	withoutVIP := func(s, p meshService) bool { s.vip = p.vip; return projectsTo(s, p) }
	lines, _ = projectionDisagreements(t, withoutVIP)
	if len(lines) == 0 {
		t.Fatal("negative control: a comparison that skips the VIP was not caught")
	}
	t.Logf("negative control (the VIP skipped): %s", lines[0])
}

// ForgetHealth makes bl's kept load assignments match m's members whatever their health, as a
// key without health would: each kept member takes the health m gives it. The negative control
// of the Builder's tests (a stale load assignment must be caught).
func (bl *Builder) ForgetHealth(m model.Mesh) {
	type member struct{ namespace, name, address string }
	health := map[member]meshv1alpha1.Health{}
	for _, s := range m.Services {
		for _, p := range s.Ports {
			for _, pr := range p.Pairs {
				for _, mb := range pr.Members {
					health[member{namespace: mb.Namespace, name: mb.Name, address: mb.Address}] = mb.Health
				}
			}
		}
	}
	for _, e := range bl.memo.loadAssignments {
		for i, s := range e.members {
			if h, ok := health[member{namespace: s.namespace, name: s.name, address: s.address}]; ok {
				e.members[i].health = h
			}
		}
	}
}

// sameServiceDisagreements changes each field of a service of a scenario, one at a time (a list
// to a copy with one more entry, a value to another (setAnother), by reflection, so a field added
// to model.Service later is changed too), and returns a line for each change that same still
// takes for the same service; and one more when the service is not the same as itself.
func sameServiceDisagreements(same func(last, s *model.Service) bool) []string {
	s := xdstest.MixedHTTPPrimary().Services[0]
	var lines []string
	if c := s; !same(&s, &c) {
		lines = append(lines, "a copy sharing every list is not the same service")
	}
	for i := range reflect.TypeFor[model.Service]().NumField() {
		changed := s // shares every list with s: only field i is replaced
		if f := reflect.ValueOf(&changed).Elem().Field(i); f.Kind() == reflect.Slice {
			f.Set(reflect.Append(reflect.AppendSlice(reflect.MakeSlice(f.Type(), 0, f.Len()+1), f), reflect.New(f.Type().Elem()).Elem()))
		} else {
			setAnother(f)
		}
		if same(&s, &changed) {
			lines = append(lines, "field "+reflect.TypeFor[model.Service]().Field(i).Name+" changed, and sameService says the same")
		}
	}
	// Equal lists in other arrays are other lists: only the very arrays are the same service.
	if c := s.Clone(); same(&s, &c) {
		lines = append(lines, "a clone (equal lists in new arrays) is taken as the same service")
	}
	return lines
}

// TestSameServiceSeesEveryField: a service's selection facts are kept while sameService says it
// is the same, so it must say otherwise for any change of any field. The negative control forgets
// Ready and is caught.
func TestSameServiceSeesEveryField(t *testing.T) {
	for _, l := range sameServiceDisagreements(sameService) {
		t.Error(l)
	}
	withoutReady := func(last, s *model.Service) bool { c := *s; c.Ready = last.Ready; return sameService(last, &c) }
	lines := sameServiceDisagreements(withoutReady)
	if len(lines) == 0 {
		t.Fatal("negative control: a comparison that forgets Ready was not caught")
	}
	t.Logf("negative control (Ready forgotten): %s", lines[0])
}

// TestMadeFromReadsNewPorts: the listeners and routes are reused without reading a selected
// service's ports again when they are the very array the last comparison read (the Builder's
// contract: its inputs are never modified in place). A service built anew has new arrays, and
// then its ports are read: for every change of one field of a service's ports, made in a copy (a
// new array, as model.BuildService makes one), madeFrom says the listeners are the same exactly
// when the projections are. The negative control takes the changed ports for the very array and
// reuses stale listeners; the count shows how many changes only the ports' reading sees.
func TestMadeFromReadsNewPorts(t *testing.T) {
	var changes, onlyPorts int
	scenarios := xdstest.All()
	for _, name := range slices.Sorted(maps.Keys(scenarios)) {
		m := scenarios[name]
		in, err := selectInputs(m, nil)
		if err != nil {
			t.Fatal(err)
		}
		memo := func() *listeningMemo {
			ports := make([][]model.Port, len(in.services))
			for i := range in.services {
				ports[i] = in.services[i].Ports
			}
			return &listeningMemo{mesh: listeningMesh(m), in: listeningInputs(in), ports: ports}
		}
		if !memo().madeFrom(m, in) {
			t.Errorf("%s: the inputs the listeners were built from are not what they were made from", name)
		}
		for i, s := range in.services {
			for _, c := range Changes(&s) {
				if !strings.HasPrefix(c.Path, "Service.Ports") {
					continue
				}
				changed := DeepCopy(s)
				c.Apply(&changed)
				in2 := in
				in2.services = slices.Clone(in.services)
				in2.services[i] = changed
				same := reflect.DeepEqual(project(changed), project(s))
				changes++
				if got := memo().madeFrom(m, in2); got != same {
					t.Errorf("%s: %s: %s: the projection is the same: %v; madeFrom says %v", name, s.key, c, same, got)
				}
				taken := memo()
				taken.ports[i] = changed.Ports // the negative control: the new array taken for the last one
				if !same && taken.madeFrom(m, in2) {
					onlyPorts++
				}
			}
		}
	}
	if changes == 0 {
		t.Fatal("no change of a service's ports: the test proves nothing")
	}
	if onlyPorts == 0 {
		t.Fatal("negative control: no change of the ports went unseen when its array was taken for the last one, so nothing shows the ports are read")
	}
	t.Logf("%d changes of a service's ports; %d of them seen only by reading the ports (missed when the array is taken for the last one)", changes, onlyPorts)
}
