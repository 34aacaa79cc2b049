// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package model

import (
	"cmp"
	"errors"
	"fmt"
	"time"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
)

// Validate reports every invariant the service breaks, each naming the field and its value. A
// Service from BuildService over endpoints the API accepted is valid; a renderer may refuse one
// that is not, rather than publish configuration from it.
func (s Service) Validate() error {
	var errs []error
	fail := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("service %s/%s: "+format, append([]any{s.Namespace, s.Name}, args...)...))
	}
	if s.Namespace == "" || s.Name == "" {
		fail("namespace and name must both be set")
	}
	if s.Ready < 0 || s.Ready > s.Endpoints {
		fail("ready %d is not within 0..endpoints (%d)", s.Ready, s.Endpoints)
	}
	if len(s.Ports) > MaxServicePorts {
		fail("ports lists %d ports, at most %d: the rest belong in leftOut", len(s.Ports), MaxServicePorts)
	}
	if s.Endpoints == 0 {
		if s.Primary != 0 || len(s.Ports) > 0 || len(s.LeftOut) > 0 {
			fail("primary %d, %d ports and %d left out without endpoints: a service without endpoints has none",
				s.Primary, len(s.Ports), len(s.LeftOut))
		}
		return errors.Join(errs...)
	}
	listed := map[int32]bool{}
	for i, p := range s.Ports {
		if i > 0 && s.Ports[i-1].Number >= p.Number {
			fail("ports[%d] is %d after %d: ports must be sorted and unique", i, p.Number, s.Ports[i-1].Number)
		}
		listed[p.Number] = true
		errs = append(errs, s.validatePort(i, p)...)
	}
	if !listed[s.Primary] {
		fail("primary %d is not among the ports", s.Primary)
	}
	for i, n := range s.LeftOut {
		if i > 0 && s.LeftOut[i-1] >= n {
			fail("leftOut[%d] is %d after %d: left-out ports must be sorted and unique", i, n, s.LeftOut[i-1])
		}
		if listed[n] {
			fail("leftOut[%d] is %d, which is also listed in ports", i, n)
		}
	}
	if len(s.LeftOut) > 0 && len(s.Ports) < MaxServicePorts {
		fail("%d ports are left out while only %d of %d are listed", len(s.LeftOut), len(s.Ports), MaxServicePorts)
	}
	return errors.Join(errs...)
}

// validatePort checks ports[i]: a valid number, at least one pair, one pair per protocol, the
// pairs in vote order with the reported protocol first, and each pair's membership consistent.
func (s Service) validatePort(i int, p Port) []error {
	var errs []error
	fail := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("service %s/%s: ports[%d] (port %d): "+format,
			append([]any{s.Namespace, s.Name, i, p.Number}, args...)...))
	}
	if p.Number < 1 || p.Number > 65535 {
		fail("number %d is not a port (1..65535)", p.Number)
	}
	if len(p.Pairs) == 0 {
		fail("no (port, protocol) pair: a listed port is declared by some endpoint")
		return errs
	}
	if p.Protocol != p.Pairs[0].Protocol {
		fail("protocol %q is not the vote's winner, pairs[0] %q", p.Protocol, p.Pairs[0].Protocol)
	}
	seen := map[meshv1alpha1.Protocol]bool{}
	for j, pr := range p.Pairs {
		switch pr.Protocol {
		case meshv1alpha1.ProtocolHTTP, meshv1alpha1.ProtocolHTTP2, meshv1alpha1.ProtocolTCP, meshv1alpha1.ProtocolUDP:
		default:
			fail("pairs[%d].protocol %q is none of HTTP, HTTP2, TCP, UDP", j, pr.Protocol)
		}
		if seen[pr.Protocol] {
			fail("pairs[%d].protocol %q is listed twice: one pair per protocol", j, pr.Protocol)
		}
		seen[pr.Protocol] = true
		if j > 0 && protocolVote(p.Pairs[j-1], pr) > 0 {
			fail("pairs[%d] (%s) outvotes pairs[%d] (%s): pairs must be in vote order (most ready, newer, name)",
				j, pr.Protocol, j-1, p.Pairs[j-1].Protocol)
		}
		validateMembers(fail, j, pr)
	}
	if declared := p.Declared(); declared > s.Endpoints {
		fail("%d members over its pairs, more than the service's %d endpoints", declared, s.Endpoints)
	}
	return errs
}

// validateMembers checks pairs[j]: members present, sorted and listed once, and ready and newest
// agreeing with them. It reports through fail.
func validateMembers(fail func(string, ...any), j int, pr Pair) {
	if len(pr.Members) == 0 {
		fail("pairs[%d] (%s) has no members", j, pr.Protocol)
		return
	}
	var ready int32
	var newest time.Time
	for k, m := range pr.Members {
		if k > 0 {
			prev := pr.Members[k-1]
			switch c := cmp.Or(cmp.Compare(prev.Namespace, m.Namespace), cmp.Compare(prev.Name, m.Name)); {
			case c == 0:
				fail("pairs[%d] (%s) lists member %s/%s twice", j, pr.Protocol, m.Namespace, m.Name)
			case c > 0:
				fail("pairs[%d] (%s).members[%d] is %s/%s after %s/%s: members must be sorted by namespace and name",
					j, pr.Protocol, k, m.Namespace, m.Name, prev.Namespace, prev.Name)
			}
		}
		if m.Health == meshv1alpha1.HealthHealthy {
			ready++
		}
		if newest.Before(m.Created) {
			newest = m.Created
		}
	}
	if ready != pr.Ready {
		fail("pairs[%d] (%s).ready is %d, %d members are Healthy", j, pr.Protocol, pr.Ready, ready)
	}
	if !newest.Equal(pr.Newest) {
		fail("pairs[%d] (%s).newest is %s, its youngest member was created %s", j, pr.Protocol,
			pr.Newest.Format(time.RFC3339), newest.Format(time.RFC3339))
	}
}
