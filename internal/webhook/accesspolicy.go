// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package webhook

import (
	"context"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	configv1 "github.com/aether-mesh/aether-operator/api/config/v1"
	"github.com/aether-mesh/aether-operator/internal/authz"
)

// AccessPolicyPath is where the AccessPolicy validator is served; config/webhook names the same
// path.
const AccessPolicyPath = "/validate-config-aether-io-v1-accesspolicy"

// AccessPolicyValidator denies an AccessPolicy that authz.Validate finds wrong: spec.ports
// without a target or naming a port of the mesh's own, a method that is not an upper-case HTTP
// token, a path prefix the proxy's normalized path could never match, a ServiceAccount or
// namespace that is not a valid name. The denial lists every problem, each naming the field, the
// value and the fix. The CRD's schema holds the rest (counts, ranges, exactly one of
// serviceAccount and namespace per source).
type AccessPolicyValidator struct {
	Decoder admission.Decoder
}

// Handle admits or denies one AccessPolicy CREATE or UPDATE.
func (v *AccessPolicyValidator) Handle(_ context.Context, req admission.Request) admission.Response {
	p := &configv1.AccessPolicy{}
	return decodeAndJudge(v.Decoder, req, p, func() string { return strings.Join(authz.Validate(p.Spec), "; ") })
}
