// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package model_test

import (
	"strings"
	"testing"
	"time"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/model"
)

// TestValidateRefuses: each broken invariant is reported naming the field and the value. The
// base is a valid service: ports 8080 (HTTP, 3 members), 9000 (TCP 2 members, HTTP 1) and 9090.
func TestValidateRefuses(t *testing.T) {
	base := build(t, input(
		endpoint(t, "payments-a", "09:00", 8080, healthy, "8080/HTTP", "9000/TCP", "9090/HTTP2"),
		endpoint(t, "payments-b", "10:00", 8080, healthy, "8080/HTTP", "9000/HTTP"),
		endpoint(t, "payments-c", "11:00", 8080, healthy, "8080/HTTP", "9000/TCP"),
	))
	if v := votes(base.Ports[1]); v != "TCP:2/2 HTTP:1/1" {
		t.Fatalf("base port 9000 votes %q", v)
	}
	for _, tc := range []struct {
		name   string
		change func(s *model.Service)
		want   string
	}{
		{"no name", func(s *model.Service) { s.Name = "" }, `service shop/: namespace and name must both be set`},
		{"ready over endpoints", func(s *model.Service) { s.Ready = 4 }, "ready 4 is not within 0..endpoints (3)"},
		{"ports unsorted", func(s *model.Service) { s.Ports[0], s.Ports[1] = s.Ports[1], s.Ports[0] },
			"ports[1] is 8080 after 9000: ports must be sorted and unique"},
		{"ports unsorted (neighbour)", func(s *model.Service) { s.Ports[1], s.Ports[2] = s.Ports[2], s.Ports[1] },
			"ports[2] is 9000 after 9090: ports must be sorted and unique"},
		{"port twice", func(s *model.Service) { s.Ports[2] = s.Ports[1] }, "ports[2] is 9000 after 9000"},
		{"port number 0", func(s *model.Service) { s.Ports[0].Number = 0 }, "ports[0] (port 0): number 0 is not a port (1..65535)"},
		{"primary not listed", func(s *model.Service) { s.Primary = 7000 }, "primary 7000 is not among the ports"},
		{"no pairs", func(s *model.Service) { s.Ports[2].Pairs = nil }, "ports[2] (port 9090): no (port, protocol) pair"},
		{"protocol not the winner", func(s *model.Service) { s.Ports[1].Protocol = meshv1alpha1.ProtocolHTTP },
			`ports[1] (port 9000): protocol "HTTP" is not the vote's winner, pairs[0] "TCP"`},
		{"pairs out of vote order", func(s *model.Service) {
			p := &s.Ports[1]
			p.Pairs[0], p.Pairs[1] = p.Pairs[1], p.Pairs[0]
			p.Protocol = p.Pairs[0].Protocol
		}, "ports[1] (port 9000): pairs[1] (TCP) outvotes pairs[0] (HTTP)"},
		{"protocol twice", func(s *model.Service) {
			s.Ports[1].Pairs[1].Protocol = meshv1alpha1.ProtocolTCP
			s.Ports[1].Pairs[1].Ready = 0
		}, `pairs[1].protocol "TCP" is listed twice`},
		{"unknown protocol", func(s *model.Service) {
			s.Ports[2].Pairs[0].Protocol, s.Ports[2].Protocol = "SCTP", "SCTP"
		}, `ports[2] (port 9090): pairs[0].protocol "SCTP" is none of HTTP, HTTP2, TCP, UDP`},
		{"empty pair", func(s *model.Service) {
			s.Ports[1].Pairs[1].Members, s.Ports[1].Pairs[1].Ready = nil, 0
			s.Ports[1].Pairs[1].Newest = time.Time{}
		}, "pairs[1] (HTTP) has no members"},
		{"member twice", func(s *model.Service) {
			m := s.Ports[0].Pairs[0].Members
			m[2] = m[1]
			s.Ports[0].Pairs[0].Newest = m[1].Created
		}, "ports[0] (port 8080): pairs[0] (HTTP) lists member shop/payments-b twice"},
		{"members unsorted", func(s *model.Service) {
			m := s.Ports[0].Pairs[0].Members
			m[0], m[1] = m[1], m[0]
		}, "pairs[0] (HTTP).members[1] is shop/payments-a after shop/payments-b: members must be sorted"},
		{"ready miscounted", func(s *model.Service) { s.Ports[0].Pairs[0].Ready = 2 },
			"ports[0] (port 8080): pairs[0] (HTTP).ready is 2, 3 members are Healthy"},
		{"newest wrong", func(s *model.Service) { s.Ports[2].Pairs[0].Newest = day },
			"ports[2] (port 9090): pairs[0] (HTTP2).newest is 2026-05-01T00:00:00Z, its youngest member was created 2026-05-01T09:00:00Z"},
		{"more members than endpoints", func(s *model.Service) { s.Endpoints, s.Ready = 2, 2 },
			"ports[0] (port 8080): 3 members over its pairs, more than the service's 2 endpoints"},
		{"left out also listed", func(s *model.Service) { s.LeftOut = []int32{9090} }, "leftOut[0] is 9090, which is also listed in ports"},
		{"left out under the cap", func(s *model.Service) { s.LeftOut = []int32{9500} },
			"1 ports are left out while only 3 of 256 are listed"},
		{"left out unsorted", func(s *model.Service) { s.LeftOut = []int32{9600, 9500} },
			"leftOut[1] is 9500 after 9600: left-out ports must be sorted and unique"},
		{"no endpoints yet ports", func(s *model.Service) { s.Endpoints, s.Ready = 0, 0 },
			"primary 8080, 3 ports and 0 left out without endpoints"},
		{"no endpoints yet a primary", func(s *model.Service) { *s = model.Service{Namespace: "shop", Name: "payments", Primary: 80} },
			"primary 80, 0 ports and 0 left out without endpoints"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := base.Clone()
			tc.change(&s)
			err := s.Validate()
			if err == nil {
				t.Fatalf("Validate accepted the change")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate: %v\nwant it to contain %q", err, tc.want)
			}
			if base.Validate() != nil || votes(base.Ports[1]) != "TCP:2/2 HTTP:1/1" {
				t.Fatal("the case changed the base")
			}
		})
	}
	t.Run("too many ports", func(t *testing.T) {
		s := base.Clone()
		for n := int32(20000); len(s.Ports) <= model.MaxServicePorts; n++ {
			p := s.Ports[2]
			p.Number = n
			s.Ports = append(s.Ports, p)
		}
		if err := s.Validate(); err == nil || !strings.Contains(err.Error(), "ports lists 257 ports, at most 256") {
			t.Errorf("Validate: %v", err)
		}
	})
}

// TestLocalPodValidate: a usable pod passes; each unusable field is named with its value.
func TestLocalPodValidate(t *testing.T) {
	good := model.LocalPod{Namespace: "shop", Name: "payments-a", NetNS: "/var/run/netns/cni-1234",
		Identity: "spiffe://aether.internal/ns/shop/sa/payments", Capture: model.CaptureSurface}
	for _, mode := range []model.CaptureMode{model.CaptureScoped, model.CaptureSurface, model.CaptureAll} {
		p := good
		p.Capture = mode
		if err := p.Validate(); err != nil {
			t.Errorf("capture %s: %v", mode, err)
		}
	}
	for _, tc := range []struct {
		change func(*model.LocalPod)
		want   string
	}{
		{func(p *model.LocalPod) { p.Name = "" }, `local pod "shop"/"": namespace and name must both be set`},
		{func(p *model.LocalPod) { p.NetNS = "netns/cni-1234" }, `netNS "netns/cni-1234" is not an absolute path`},
		{func(p *model.LocalPod) { p.NetNS = "" }, `netNS "" is not an absolute path`},
		{func(p *model.LocalPod) { p.Identity = "" }, "local pod shop/payments-a: identity is empty"},
		{func(p *model.LocalPod) { p.Capture = "" }, `capture mode "" is none of "scoped", "surface", "all"`},
		{func(p *model.LocalPod) { p.Capture = "everything" }, `capture mode "everything" is none of`},
	} {
		p := good
		tc.change(&p)
		if err := p.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate: %v, want %q", err, tc.want)
		}
	}
}

// TestParseCaptureMode: the three modes as the flag and the annotation spell them; anything else
// (another case, a blank) is an error that lists them.
func TestParseCaptureMode(t *testing.T) {
	for _, mode := range model.CaptureModes {
		if got, err := model.ParseCaptureMode(string(mode)); got != mode || err != nil {
			t.Errorf("ParseCaptureMode(%q) = %q, %v", mode, got, err)
		}
	}
	for _, bad := range []string{"", "Surface", "none", " all"} {
		if got, err := model.ParseCaptureMode(bad); err == nil || !strings.Contains(err.Error(), `is none of "scoped", "surface", "all"`) {
			t.Errorf("ParseCaptureMode(%q) = %q, %v; want an error listing the modes", bad, got, err)
		}
	}
}
