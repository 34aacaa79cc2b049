// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package authz_test

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	configv1 "github.com/aether-mesh/aether-operator/api/config/v1"
	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/authz"
)

const td = "aether.internal"

var payments = authz.Service{Namespace: "shop", Name: "payments", Ports: []meshv1alpha1.PortProtocol{
	{Port: 8080, Protocol: meshv1alpha1.ProtocolHTTP}, {Port: 9000, Protocol: meshv1alpha1.ProtocolTCP},
}}

func policy(ns, name string, target string, ports []int32, rules ...configv1.AccessRule) configv1.AccessPolicy {
	p := configv1.AccessPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: configv1.AccessPolicySpec{Ports: ports, Rules: rules}}
	if target != "" {
		p.Spec.TargetRef = &configv1.TargetRef{Kind: configv1.KindService, Name: target}
	}
	return p
}

func sa(ns, name string) configv1.AccessSource {
	return configv1.AccessSource{ServiceAccount: &configv1.ServiceAccountRef{Namespace: ns, Name: name}}
}

func namespace(ns string) configv1.AccessSource { return configv1.AccessSource{Namespace: ns} }

func port(t *testing.T, ports []authz.Port, n int32) authz.Port {
	t.Helper()
	for _, p := range ports {
		if p.Port == n {
			return p
		}
	}
	t.Fatalf("no port %d in %+v", n, ports)
	return authz.Port{}
}

// TestDecide: the semantics AccessPolicySpec states, call by call.
func TestDecide(t *testing.T) {
	frontend, admin, billing := authz.IdentityOf(td, "shop", "frontend"), authz.IdentityOf(td, "shop", "admin"), authz.IdentityOf(td, "billing", "worker")
	for _, tc := range []struct {
		name     string
		policies []configv1.AccessPolicy
		port     int32
		call     authz.Call
		admitted bool
		by       string
	}{
		{"no policy: open", nil, 8080, authz.Call{Caller: admin, Method: "GET", Path: "/"}, true, ""},
		{"a policy of another service: open", []configv1.AccessPolicy{policy("shop", "p", "orders", nil)}, 8080, authz.Call{Caller: admin}, true, ""},
		{"a policy of another namespace: open", []configv1.AccessPolicy{policy("other", "p", "", nil)}, 8080, authz.Call{Caller: admin}, true, ""},
		{"governed, admitted by identity", []configv1.AccessPolicy{policy("shop", "p", "payments", nil,
			configv1.AccessRule{From: []configv1.AccessSource{sa("", "frontend")}})}, 8080, authz.Call{Caller: frontend, Method: "GET", Path: "/x"}, true, "shop/p#0"},
		{"governed, another identity denied", []configv1.AccessPolicy{policy("shop", "p", "payments", nil,
			configv1.AccessRule{From: []configv1.AccessSource{sa("", "frontend")}})}, 8080, authz.Call{Caller: admin, Method: "GET", Path: "/x"}, false, ""},
		{"a policy of another port leaves this one open", []configv1.AccessPolicy{policy("shop", "p", "payments", []int32{9000})}, 8080, authz.Call{Caller: admin}, true, ""},
		{"namespace-wide, no rules: deny", []configv1.AccessPolicy{policy("shop", "default-deny", "", nil)}, 9000, authz.Call{Caller: frontend}, false, ""},
		{"namespace-wide deny, a targeted policy admits", []configv1.AccessPolicy{policy("shop", "default-deny", "", nil),
			policy("shop", "p", "payments", []int32{9000}, configv1.AccessRule{From: []configv1.AccessSource{namespace("billing")}})}, 9000, authz.Call{Caller: billing}, true, "shop/p#0"},
		{"a namespace source does not admit a prefix of it", []configv1.AccessPolicy{policy("shop", "p", "payments", nil,
			configv1.AccessRule{From: []configv1.AccessSource{namespace("bill")}})}, 9000, authz.Call{Caller: billing}, false, ""},
		{"method and path: admitted", []configv1.AccessPolicy{policy("shop", "p", "payments", nil,
			configv1.AccessRule{From: []configv1.AccessSource{sa("shop", "frontend")}, Methods: []string{"GET"}, PathPrefixes: []string{"/api/"}})},
			8080, authz.Call{Caller: frontend, Method: "GET", Path: "/api/orders?x=1"}, true, "shop/p#0"},
		{"path by whole segments", []configv1.AccessPolicy{policy("shop", "p", "payments", nil,
			configv1.AccessRule{From: []configv1.AccessSource{sa("shop", "frontend")}, PathPrefixes: []string{"/api"}})},
			8080, authz.Call{Caller: frontend, Method: "GET", Path: "/apis"}, false, ""},
		{"another method denied", []configv1.AccessPolicy{policy("shop", "p", "payments", nil,
			configv1.AccessRule{From: []configv1.AccessSource{sa("shop", "frontend")}, Methods: []string{"GET"}})},
			8080, authz.Call{Caller: frontend, Method: "DELETE", Path: "/"}, false, ""},
		{"an HTTP rule admits nothing on a TCP port", []configv1.AccessPolicy{policy("shop", "p", "payments", nil,
			configv1.AccessRule{From: []configv1.AccessSource{sa("shop", "frontend")}, Methods: []string{"GET"}})},
			9000, authz.Call{Caller: frontend}, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ports, _ := authz.Ports(td, payments, tc.policies)
			admitted, by := authz.Decide(td, port(t, ports, tc.port), tc.call)
			if admitted != tc.admitted {
				t.Errorf("admitted %t, want %t", admitted, tc.admitted)
			}
			if got := ""; by != nil || tc.by != "" {
				if by != nil {
					got = by.Name()
				}
				if got != tc.by {
					t.Errorf("decided by %q, want %q", got, tc.by)
				}
			}
		})
	}
}

// TestProblems: the parts of a policy that have no effect now are named, with the field and the fix.
func TestProblems(t *testing.T) {
	ports, problems := authz.Ports(td, payments, []configv1.AccessPolicy{
		policy("shop", "p", "payments", []int32{9000, 7000}, configv1.AccessRule{From: []configv1.AccessSource{sa("", "frontend")}, PathPrefixes: []string{"/x"}}),
	})
	if len(problems) != 2 || problems[0].Reason != configv1.AccessReasonPortNotDeclared || problems[1].Reason != configv1.AccessReasonHTTPRuleOnTCPPort {
		t.Fatalf("problems %+v, want PortNotDeclared (7000) then HTTPRuleOnTCPPort (9000)", problems)
	}
	if p := port(t, ports, 9000); !p.Governed || len(p.Rules) != 0 || len(p.Inert) != 1 {
		t.Errorf("port 9000: %+v, want governed, no rule, one inert", p)
	}
	if p := port(t, ports, 8080); p.Governed {
		t.Errorf("port 8080: %+v, want open (the policy lists 9000 and 7000)", p)
	}
}
