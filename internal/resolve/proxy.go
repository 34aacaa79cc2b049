// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package resolve

import (
	"fmt"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
)

// The mesh's HTTP proxy port (18081) is what a client sets as its HTTP proxy
// (HTTP_PROXY=http://127.0.0.1:18081). It takes both request forms: origin-form with the mesh
// name and port in Host, and absolute-form (GET http://<name>:<port>/x), whose URL is the
// authority (RFC 9112 section 3.2.2: a Host that disagrees is ignored). Either way the
// authority decides by HTTPRequest. The proxy port answers two requests itself:
//
//   - an authority naming no mesh service: 404 not-mesh-name. The proxy port is the mesh's
//     only; a client sends other hosts direct (NO_PROXY). (A captured connection is different:
//     a name that is not the mesh's passes through to the address dialled.)
//   - CONNECT: refused, 403. The proxy port carries plain HTTP and the mesh originates the TLS
//     of every hop itself, so there is nothing to tunnel: an https:// URL is not the mesh's
//     (HTTPS_PROXY must not name the proxy port). Envoy gives that answer itself, before any
//     route (no upgrade_configs entry allows CONNECT), so it has no words of this package.

// NotMeshName is what the proxy port answers a request whose authority names no mesh service
// (none of Names or LocalName of a service the caller can see), in the mesh whose domain is
// meshDomain.
func NotMeshName(meshDomain string) Result {
	problem := "the proxy port serves mesh services only, and the request's host names none"
	works := fmt.Sprintf("name a service <service>.<namespace>.%s:<port> (or its Kubernetes names), "+
		"and send every other host direct: list it in NO_PROXY", meshDomain)
	return Result{Protocol: meshv1alpha1.ProtocolHTTP, Outcome: NotMesh, Error: NotAMeshName,
		Reason: fmt.Sprintf("%s: answered %d with %s: %s; %s", problem, HTTPStatus(NotMesh), ErrorHeader, NotAMeshName, works),
		Body:   problem + ".\n" + works + ".\n"}
}
