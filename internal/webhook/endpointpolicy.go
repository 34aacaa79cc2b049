// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package webhook

import (
	"context"
	"net/http"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	configv1 "github.com/aether-mesh/aether-operator/api/config/v1"
	"github.com/aether-mesh/aether-operator/internal/endpointpolicy"
)

// EndpointPolicyPath is where the EndpointPolicy validator is served; config/webhook names the
// same path.
const EndpointPolicyPath = "/validate-config-aether-io-v1-endpointpolicy"

// EndpointPolicyValidator denies an EndpointPolicy whose spec.udsSocket does not parse
// (portspec.ParseUDSSocket, through endpointpolicy.Socket): a malformed value, extra path
// segments, "..", an absolute path, or a socket file over its 54-byte budget. The denial is the
// parser's message: it names the field, the value and the fix. The CRD's schema already holds
// targetRef to a core Service.
//
// What the policy cannot show — whether the Service's pods mount the named volume as
// csi.aether.io — is the node agent's to judge, per pod.
type EndpointPolicyValidator struct {
	Decoder admission.Decoder
}

// Handle admits or denies one EndpointPolicy CREATE or UPDATE.
func (v *EndpointPolicyValidator) Handle(_ context.Context, req admission.Request) admission.Response {
	p := &configv1.EndpointPolicy{}
	return decodeAndJudge(v.Decoder, req, p, func() string {
		if _, err := endpointpolicy.Socket(p); err != nil {
			return err.Error()
		}
		return ""
	})
}

// decodeAndJudge decodes req into obj and denies it with the message problem returns for it, admitting it
// when that is empty.
func decodeAndJudge(decoder admission.Decoder, req admission.Request, obj runtime.Object, problem func() string) admission.Response {
	if err := decoder.Decode(req, obj); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if msg := problem(); msg != "" {
		return admission.Denied(msg)
	}
	return admission.Allowed("")
}
