// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package portspec

// AnnotationIdentityGate opts a mesh pod out of the identity gate with the value IdentityGateOff:
// the pod webhook then does not inject aether-identity-ready, the init container that holds
// the pod's containers until SPIRE has issued the pod's X.509 SVID. IdentityGateOn, or no
// annotation, keeps the gate (the default).
const AnnotationIdentityGate = "aether.io/identity-gate"

// The values of AnnotationIdentityGate.
const (
	IdentityGateOn  = "true"
	IdentityGateOff = "false"
)

// identityGateFix is what an invalid AnnotationIdentityGate value is told.
const identityGateFix = `want "false" (the pod's containers start without waiting for its SPIFFE identity, and its first ` +
	`connections may fail until SPIRE issues it) or "true" (the default: they start once SPIRE has issued it)`

// identityGateOff reads AnnotationIdentityGate: true when the pod opts out of the gate.
func (p *parser) identityGateOff() bool {
	v, ok := p.lookup(AnnotationIdentityGate, identityGateFix)
	if !ok {
		return false
	}
	switch v {
	case IdentityGateOn:
		return false
	case IdentityGateOff:
		return true
	}
	p.fail(AnnotationIdentityGate, v, KindInvalidIdentityGate, identityGateFix+didYouMean(v, []string{IdentityGateOff, IdentityGateOn}),
		"%q is neither \"true\" nor \"false\"", v)
	return false
}
