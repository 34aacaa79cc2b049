// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xds

import (
	"fmt"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/model"
)

// Resources is one node's Envoy configuration. Each list is sorted by name, each name once.
// Secrets are not here: the agent serves them by SDS from SPIRE (the names come from
// CertificateSecret and TrustBundleSecret).
type Resources struct {
	Clusters  []*clusterv3.Cluster
	Endpoints []*endpointv3.ClusterLoadAssignment
	Listeners []*listenerv3.Listener
	Routes    []*routev3.RouteConfiguration
	// Skipped says, one sentence each and sorted, what Build left out of an otherwise good build
	// and why: one bad service or pod does not take the node's whole configuration down with it.
	Skipped []string
}

// Build renders the node's mesh as Envoy resources: pure, deterministic (the same mesh gives the
// same bytes), and valid (every message passes its generated validator before it is packed).
func Build(m model.Mesh) (Resources, error) {
	in, err := selectInputs(m)
	if err != nil {
		return Resources{}, err
	}
	// Every builder reads the same selection of pods and services, so no chain or route can name
	// a cluster the cluster builder left out.
	b := &builder{mesh: m, in: in}
	b.attached = b.attachRoutes() // the Gateway API routes, resolved once, read by chains and virtual hosts
	var res Resources
	res.Clusters = b.clusters()
	res.Endpoints = b.endpoints()
	res.Listeners = b.listeners()
	res.Routes = b.routes()
	res.Skipped = b.skipNotes() // last: it gathers what every builder recorded
	return res, b.err
}

// builder carries the first error of a build, so the builders read as straight-line code.
type builder struct {
	mesh model.Mesh
	// in are the pods and services that are built from (selectInputs); the rest is Skipped.
	in  listenerInputs
	err error
	// skipped are what the builders left out, one sentence each (Resources.Skipped); skippedOnce
	// keeps a note met once per identity from being listed again (skip).
	skipped     []string
	skippedOnce map[string]bool
	// attached are the Gateway API routes attached to each port of each selected service
	// (attachRoutes).
	attached map[servicePort][]*attachedRoute
	// httpOptionsOf are the packed upstream HTTP protocol options, by protocol (httpOptions).
	httpOptionsOf map[meshv1alpha1.Protocol]*anypb.Any
}

// validator is what the generated protoc-gen-validate code gives every Envoy message.
type validator interface{ ValidateAll() error }

// check validates m (every message Build emits or packs passes through it) and records the
// first failure, naming what was being built.
func (b *builder) check(what string, m proto.Message) {
	if b.err != nil {
		return
	}
	if v, ok := m.(validator); ok {
		if err := v.ValidateAll(); err != nil {
			b.err = fmt.Errorf("xds: %s is invalid: %w", what, err)
		}
	}
}

// pack validates m and wraps it in an Any. The generated validators do not descend into an Any,
// so this is the only place a typed config is checked: never call anypb.New directly.
func (b *builder) pack(what string, m proto.Message) *anypb.Any {
	b.check(what, m)
	// Deterministic: a map packed in random order would change a listener's bytes between two
	// builds of the same mesh, and Envoy drains a listener whose bytes change.
	a := &anypb.Any{}
	err := anypb.MarshalFrom(a, m, proto.MarshalOptions{Deterministic: true})
	if err != nil && b.err == nil {
		b.err = fmt.Errorf("xds: packing %s: %w", what, err)
	}
	return a
}
