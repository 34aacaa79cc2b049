// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Package authz is the one reading of AccessPolicies: which of a service's ports they govern, and
// what each governed port admits. The agent renders its answer (Envoy's RBAC filters on the
// inbound chains, the proxyless servers' xDS RBAC), the controller reports it (conditions, the
// policies listed on each MeshService port), and Decide answers one call the way the rendered
// filters do, for kubectl aether dial and the tests' oracle. The semantics are the ones
// api/config/v1's AccessPolicySpec states.
package authz

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	configv1 "github.com/aether-mesh/aether-operator/api/config/v1"
	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
)

// DeniedError is the x-aether-error value of an HTTP request no rule admits (403).
const DeniedError = "access-denied"

// Service is what the policies are read against: one service's namespace, name and ports.
type Service struct {
	Namespace, Name string
	Ports           []meshv1alpha1.PortProtocol
}

// Rule is one rule of one policy, as it applies to one port.
type Rule struct {
	// Policy is the policy's "<namespace>/<name>"; Index the rule's index in its spec.rules.
	Policy string
	Index  int
	// Identities are the admitted ServiceAccounts' SPIFFE IDs; Namespaces the namespaces whose
	// every identity is admitted (spiffe://<trust domain>/ns/<namespace>/sa/…). Sorted.
	Identities, Namespaces []string
	// Methods and PathPrefixes narrow an HTTP-class port's requests (empty: any). PathPrefixes
	// are normalized: no trailing "/" but for "/" itself.
	Methods, PathPrefixes []string
}

// Name is the rule's stable name: "<namespace>/<name>#<index>".
func (r Rule) Name() string { return fmt.Sprintf("%s#%d", r.Policy, r.Index) }

// Port is what the policies make of one port.
type Port struct {
	Port     int32
	Protocol meshv1alpha1.Protocol
	// Governed: some policy governs the port; only Rules reach it. Not governed, it is open.
	Governed bool
	// Policies are the governing policies' "<namespace>/<name>", sorted.
	Policies []string
	// Rules admit the port's calls, in policy then index order. A rule that can admit nothing
	// here (methods or paths on a TCP port) is left out, and listed in Inert.
	Rules []Rule
	Inert []Rule
}

// Problem is a part of a policy that has no effect now: the Accepted condition's reasons.
type Problem struct {
	Policy  string
	Reason  string
	Message string
}

// Ports reads the policies of svc's namespace against svc, in svc's port order, for the mesh's
// trust domain. Policies of other namespaces, or targeting other services, are ignored. problems
// are the parts of the policies that govern svc and have no effect on it (their Accepted reasons).
func Ports(trustDomain string, svc Service, policies []configv1.AccessPolicy) (ports []Port, problems []Problem) {
	ports = make([]Port, len(svc.Ports))
	for i, p := range svc.Ports {
		ports[i] = Port{Port: p.Port, Protocol: p.Protocol}
	}
	sorted := slices.Clone(policies)
	slices.SortFunc(sorted, func(a, b configv1.AccessPolicy) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	for _, pol := range sorted {
		if !Targets(pol, svc.Namespace, svc.Name) {
			continue
		}
		name := pol.Namespace + "/" + pol.Name
		for _, want := range pol.Spec.Ports {
			if !slices.ContainsFunc(svc.Ports, func(p meshv1alpha1.PortProtocol) bool { return p.Port == want }) {
				problems = append(problems, Problem{name, configv1.AccessReasonPortNotDeclared,
					fmt.Sprintf("spec.ports: %d is not a port of %s/%s (its ports: %s); the policy governs it once it is declared", want, svc.Namespace, svc.Name, portList(svc.Ports))})
			}
		}
		for i := range ports {
			if len(pol.Spec.Ports) > 0 && !slices.Contains(pol.Spec.Ports, ports[i].Port) {
				continue
			}
			ports[i].Governed = true
			ports[i].Policies = append(ports[i].Policies, name)
			for j, r := range pol.Spec.Rules {
				rule := compile(trustDomain, pol.Namespace, name, j, r)
				if !ports[i].Protocol.IsHTTP() && (len(rule.Methods) > 0 || len(rule.PathPrefixes) > 0) {
					ports[i].Inert = append(ports[i].Inert, rule)
					problems = append(problems, Problem{name, configv1.AccessReasonHTTPRuleOnTCPPort,
						fmt.Sprintf("spec.rules[%d] has methods or pathPrefixes, which admit nothing on port %d (TCP: the mesh sees no request); drop them, or list spec.ports without %d", j, ports[i].Port, ports[i].Port)})
					continue
				}
				ports[i].Rules = append(ports[i].Rules, rule)
			}
		}
	}
	return ports, problems
}

// Targets reports whether pol governs ports of service namespace/name: it is of that namespace,
// and targets that service or none.
func Targets(pol configv1.AccessPolicy, namespace, name string) bool {
	if pol.Namespace != namespace {
		return false
	}
	return pol.Spec.TargetRef == nil || pol.Spec.TargetRef.Name == name
}

func compile(trustDomain, policyNamespace, policy string, index int, r configv1.AccessRule) Rule {
	rule := Rule{Policy: policy, Index: index, Methods: slices.Sorted(slices.Values(r.Methods))}
	for _, from := range r.From {
		switch {
		case from.ServiceAccount != nil:
			ns := cmp.Or(from.ServiceAccount.Namespace, policyNamespace)
			rule.Identities = append(rule.Identities, IdentityOf(trustDomain, ns, from.ServiceAccount.Name))
		case from.Namespace != "":
			rule.Namespaces = append(rule.Namespaces, from.Namespace)
		}
	}
	for _, p := range r.PathPrefixes {
		rule.PathPrefixes = append(rule.PathPrefixes, NormalizePrefix(p))
	}
	slices.Sort(rule.Identities)
	rule.Identities = slices.Compact(rule.Identities)
	slices.Sort(rule.Namespaces)
	rule.Namespaces = slices.Compact(rule.Namespaces)
	slices.Sort(rule.PathPrefixes)
	rule.PathPrefixes = slices.Compact(rule.PathPrefixes)
	return rule
}

// IdentityOf is ServiceAccount namespace/name's SPIFFE ID in trustDomain (as
// workloadidentity.ServiceAccountID spells it).
func IdentityOf(trustDomain, namespace, name string) string {
	return "spiffe://" + trustDomain + "/ns/" + namespace + "/sa/" + name
}

// NamespacePrefix is the prefix of every SPIFFE ID of namespace in trustDomain.
func NamespacePrefix(trustDomain, namespace string) string {
	return "spiffe://" + trustDomain + "/ns/" + namespace + "/sa/"
}

// NormalizePrefix drops a path prefix's trailing "/" (but "/" stays itself): "/api/" and "/api"
// both admit /api and /api/…, by whole segments.
func NormalizePrefix(p string) string {
	if trimmed := strings.TrimRight(p, "/"); trimmed != "" {
		return trimmed
	}
	return "/"
}

// PathMatches reports whether path (without its query) is prefix or below it by whole segments.
func PathMatches(prefix, path string) bool {
	return prefix == "/" || path == prefix || strings.HasPrefix(path, prefix+"/")
}

// Call is one call to a port, as the rendered filters see it: the caller's SPIFFE ID (the peer
// certificate's URI SAN) and, on an HTTP-class port, the request's method and path.
type Call struct {
	Caller       string
	Method, Path string
}

// Decide answers call to p as the rendered filters do: admitted, and by which rule (nil when the
// port is open, or when it is denied).
func Decide(trustDomain string, p Port, call Call) (admitted bool, by *Rule) {
	if !p.Governed {
		return true, nil
	}
	path, _, _ := strings.Cut(call.Path, "?")
	for i, r := range p.Rules {
		if !r.admitsCaller(trustDomain, call.Caller) {
			continue
		}
		if p.Protocol.IsHTTP() {
			if len(r.Methods) > 0 && !slices.Contains(r.Methods, call.Method) {
				continue
			}
			if len(r.PathPrefixes) > 0 && !slices.ContainsFunc(r.PathPrefixes, func(pre string) bool { return PathMatches(pre, path) }) {
				continue
			}
		}
		return true, &p.Rules[i]
	}
	return false, nil
}

func (r Rule) admitsCaller(trustDomain, caller string) bool {
	if slices.Contains(r.Identities, caller) {
		return true
	}
	return slices.ContainsFunc(r.Namespaces, func(ns string) bool {
		rest, ok := strings.CutPrefix(caller, NamespacePrefix(trustDomain, ns))
		return ok && rest != "" && !strings.Contains(rest, "/")
	})
}

func portList(ports []meshv1alpha1.PortProtocol) string {
	s := make([]string, len(ports))
	for i, p := range ports {
		s[i] = fmt.Sprint(p.Port)
	}
	return strings.Join(s, ", ")
}
