// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Package endpointpolicy owns the rules of EndpointPolicy (config.aether.io/v1) that both the
// manager and the node agent apply: which policy of several targeting one Service wins, what a
// policy's Accepted condition says, and what its spec.udsSocket means (through internal/portspec,
// the one parser of the <volume>/<socket-file> value).
//
// It is pure: no client, no I/O, no clock. It must not import internal/agent or
// internal/controller; both import it.
package endpointpolicy

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	configv1 "github.com/aether-mesh/aether-operator/api/config/v1"
	"github.com/aether-mesh/aether-operator/internal/portspec"
)

// FieldUDSSocket is the path of the socket field, as errors name it.
const FieldUDSSocket = "spec.udsSocket"

// Targets reports whether p targets the Service namespace/name.
func Targets(p *configv1.EndpointPolicy, namespace, service string) bool {
	return p.Namespace == namespace && p.Spec.TargetRef.Group == "" && p.Spec.TargetRef.Kind == configv1.KindService &&
		p.Spec.TargetRef.Name == service
}

// Winner is the policy that applies to the Service namespace/name, of policies (any namespaces):
// of those targeting it, the one with the lexicographically smallest name; nil when none does.
// A malformed policy can win: it then applies nothing, and says so (Accepted=False, Invalid).
func Winner(policies []configv1.EndpointPolicy, namespace, service string) *configv1.EndpointPolicy {
	var win *configv1.EndpointPolicy
	for i := range policies {
		p := &policies[i]
		if Targets(p, namespace, service) && (win == nil || p.Name < win.Name) {
			win = p
		}
	}
	return win
}

// Socket parses p's spec.udsSocket with portspec.ParseUDSSocket; the error names the field, the
// value and the fix.
func Socket(p *configv1.EndpointPolicy) (portspec.UDSSocket, error) {
	return portspec.ParseUDSSocket(FieldUDSSocket, p.Spec.UDSSocket)
}

// Accepted is p's Accepted condition among policies (its namespace's, p included or not):
// False, Conflicted, when another policy targeting the same Service wins (the message names it);
// False, Invalid, when its socket does not parse; else True. Timestamps are left to the writer.
func Accepted(p *configv1.EndpointPolicy, policies []configv1.EndpointPolicy) metav1.Condition {
	c := metav1.Condition{Type: configv1.PolicyConditionAccepted}
	win := Winner(append([]configv1.EndpointPolicy{*p}, policies...), p.Namespace, p.Spec.TargetRef.Name)
	if win.Name != p.Name {
		c.Status, c.Reason = metav1.ConditionFalse, configv1.PolicyReasonConflicted
		c.Message = fmt.Sprintf("EndpointPolicy %s also targets Service %s and wins (of the policies targeting one Service, the "+
			"lexicographically smallest name applies); delete this policy or %s, or target another Service",
			win.Name, p.Spec.TargetRef.Name, win.Name)
		return c
	}
	if _, err := Socket(p); err != nil {
		c.Status, c.Reason = metav1.ConditionFalse, configv1.PolicyReasonInvalid
		c.Message = err.Error()
		return c
	}
	c.Status, c.Reason = metav1.ConditionTrue, configv1.PolicyReasonAccepted
	c.Message = fmt.Sprintf("the pods of Service %s without an %s annotation of their own are delivered to %s", p.Spec.TargetRef.Name,
		portspec.AnnotationUDSSocket, strings.TrimSpace(p.Spec.UDSSocket))
	return c
}
