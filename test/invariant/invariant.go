// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Package invariant is the mesh's "nothing lost" invariant, checked against a live API server
// (test code: the envtest suites and the cluster tier's fault specs poll it after each fault).
// Check reads the cluster and recomputes, with the very functions the agent and the controller
// use (never a second copy), what they would write, and reports every difference:
//
//   - endpoints: every running managed pod with an IP has exactly one MeshEndpoint, named after
//     it, whose spec is the pod's registration (registration.Registration, the agent's) and
//     whose Verified condition is the controller's verdict (controller.EndpointVerdict); and no
//     MeshEndpoint outlives its managed pod.
//   - meshservices: a MeshService exists exactly when the controller keeps one, and its status
//     (ports, counts, defaults, dial surface, VIP, conditions) is a fresh translation of the
//     live, verified MeshEndpoints (controller.Translate, stamped by controller.StampStatus).
//   - services: each generated Service is exactly what the controller writes
//     (meshservice.ServiceToWrite of that translation).
//   - routes: every route status.parents entry of mesh.aether.io/controller is a fresh
//     evaluation (controller.GatherRoute, routes.Evaluate, routes.MergeParents).
//   - fieldmanagers: managedFields name only the writers the code names: MeshEndpoints the agent
//     (agent.FieldManager; their status the controller too), MeshServices and generated Services
//     the controller (controller.FieldManager), routes anyone but the controller outside status.
//
// A read that fails is a violation too (check "read"): a caller polling through an API server
// restart keeps polling. Conditions are compared without their lastTransitionTime.
package invariant

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aether-mesh/aether-operator/internal/registration"
	"github.com/aether-mesh/aether-operator/internal/resolve"
	"github.com/aether-mesh/aether-operator/internal/workloadidentity"
)

// The checks, as Violation.Check names them.
const (
	CheckEndpoints     = "endpoints"
	CheckMeshServices  = "meshservices"
	CheckServices      = "services"
	CheckRoutes        = "routes"
	CheckFieldManagers = "fieldmanagers"
	CheckRead          = "read"
)

// Options say what the mesh was told and where to look.
type Options struct {
	// Namespace limits the check to one namespace; empty checks every namespace.
	Namespace string
	// MeshDomain is the manager's --mesh-domain; empty is the default, resolve.DefaultMeshDomain.
	MeshDomain string
	// Issuer is the manager's --identity-issuer; empty is spire.
	Issuer workloadidentity.Issuer
	// Ignored are the namespaces the manager and the agents ignore (--ignored-namespaces and the
	// namespace they run in); nil is registration.DefaultIgnoredNamespaces, which holds the
	// operator's namespace of config/default.
	Ignored registration.IgnoredNamespaces
}

func (o Options) withDefaults() Options {
	if o.MeshDomain == "" {
		o.MeshDomain = resolve.DefaultMeshDomain
	}
	if o.Ignored == nil {
		o.Ignored = registration.IgnoredNamespaces{}
		for _, ns := range registration.DefaultIgnoredNamespaces {
			o.Ignored[ns] = true
		}
	}
	return o
}

// Violation is one difference between the cluster and what the mesh would make of it.
type Violation struct {
	// Check is the check that found it (CheckEndpoints …).
	Check string
	// Kind, Namespace and Name name the object that is wrong (or missing).
	Kind, Namespace, Name string
	// Field is the field that differs, as a path (status.ports[8080].endpoints); "(object)"
	// when the whole object is missing or should not exist.
	Field string
	// Want is what the mesh would write, Got what the cluster holds.
	Want, Got string
}

// FieldObject is Violation.Field when the object itself is missing or should not exist.
const FieldObject = "(object)"

func (v Violation) String() string {
	return fmt.Sprintf("[%s] %s %s/%s %s: want %s, got %s", v.Check, v.Kind, v.Namespace, v.Name, v.Field, v.Want, v.Got)
}

// Check reads the cluster through c (which needs to read pods, nodes, ServiceAccounts,
// Services, the mesh's kinds and the Gateway API routes and ReferenceGrants) and returns every
// violation of the invariant, sorted; none when the mesh has converged. The caller polls it
// within its bound (Within).
func Check(ctx context.Context, c client.Reader, opts Options) []Violation {
	opts = opts.withDefaults()
	s, violations := read(ctx, c, opts)
	if len(violations) > 0 {
		return violations
	}
	now := time.Now()
	violations = append(violations, checkEndpoints(s, opts)...)
	violations = append(violations, checkMeshServices(s, opts, now)...)
	violations = append(violations, checkRoutes(ctx, c, s, now)...)
	violations = append(violations, checkFieldManagers(s)...)
	slices.SortFunc(violations, func(a, b Violation) int {
		return strings.Compare(a.Check+"\x00"+a.Kind+"\x00"+a.Namespace+"\x00"+a.Name+"\x00"+a.Field,
			b.Check+"\x00"+b.Kind+"\x00"+b.Namespace+"\x00"+b.Name+"\x00"+b.Field)
	})
	return violations
}

// Within polls Check every quarter second until it finds nothing or bound has passed (or ctx
// ends), and returns what the last Check found (nil once clean) and how long it took.
func Within(ctx context.Context, c client.Reader, opts Options, bound time.Duration) ([]Violation, time.Duration) {
	start := time.Now()
	for {
		found := Check(ctx, c, opts)
		if len(found) == 0 || time.Since(start) >= bound || ctx.Err() != nil {
			return found, time.Since(start)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// readFailed is the violation of a read that failed.
func readFailed(kind, namespace, name string, err error) Violation {
	return Violation{Check: CheckRead, Kind: kind, Namespace: namespace, Name: name, Field: FieldObject, Want: "a successful read", Got: err.Error()}
}
