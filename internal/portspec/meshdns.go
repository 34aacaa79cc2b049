// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package portspec

// AnnotationMeshDNS opts a mesh pod out of the mesh DNS with the value MeshDNSOff: its capture
// then leaves its DNS queries alone, and it resolves through its own resolver only (mesh names
// do not resolve there). MeshDNSOn, or no annotation, keeps it (the default).
const AnnotationMeshDNS = "aether.io/mesh-dns"

// The values of AnnotationMeshDNS.
const (
	MeshDNSOn  = "true"
	MeshDNSOff = "false"
)

// meshDNSFix is what an invalid AnnotationMeshDNS value is told.
const meshDNSFix = `want "false" (the pod's DNS queries go to its resolver untouched, and mesh names such as ` +
	`<service>.<namespace>.aether.internal do not resolve) or "true" (the default: the mesh DNS answers mesh names ` +
	`and forwards every other query)`

// meshDNSOff reads AnnotationMeshDNS: true when the pod opts out of the mesh DNS.
func (p *parser) meshDNSOff() bool {
	v, ok := p.lookup(AnnotationMeshDNS, meshDNSFix)
	if !ok {
		return false
	}
	switch v {
	case MeshDNSOn:
		return false
	case MeshDNSOff:
		return true
	}
	p.fail(AnnotationMeshDNS, v, KindInvalidMeshDNS, meshDNSFix+didYouMean(v, []string{MeshDNSOff, MeshDNSOn}),
		"%q is neither \"true\" nor \"false\"", v)
	return false
}
