// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xds

import (
	"fmt"
	"strings"
	"sync"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	runtimev3 "github.com/envoyproxy/go-control-plane/envoy/service/runtime/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/authz"
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
	// Runtimes are the RTDS layers the bootstrap names: ListenerLimitsLayer, always one.
	Runtimes []*runtimev3.Runtime
	// Skipped says, one sentence each and sorted, what Build left out of an otherwise good build
	// and why: one bad service or pod does not take the node's whole configuration down with it.
	Skipped []string
	// Access is, by inbound listener name (and inbound QUIC listener name, model.Mesh.HopHTTP3),
	// what the AccessPolicies make of each port its pod
	// serves (model.LocalPod.AccessOf, in the pod's port order): what the listener's chains were
	// built to enforce, for the gates (xdscheck.Authorization) and the simulator. Not published.
	Access map[string][]authz.Port
	// Cleartext is, by proxyless server listener name, whom its chains without TLS were built
	// to take (BuildProxylessServer), for the gates. Not published.
	Cleartext map[string]Cleartext
}

// Build renders the node's mesh as Envoy resources: pure, deterministic (the same mesh gives the
// same bytes), and valid (every message passes its generated validator before it is packed).
// A Builder builds the same, reusing its last build's parts.
func Build(m model.Mesh) (Resources, error) { return build(m, nil) }

// build renders m, reusing and recording in memo what it can (a Builder's), or afresh when memo
// is nil.
func build(m model.Mesh, memo *memo) (Resources, error) {
	if memo != nil {
		memo.start(m)
	}
	in, err := selectInputs(m, memo)
	if err != nil {
		return Resources{}, err
	}
	// Every builder reads the same selection of pods and services, so no chain or route can name
	// a cluster the cluster builder left out. The listeners and routes are built beside the
	// clusters and load assignments, each half by a builder of its own: they only read the mesh
	// and the selection (the listeners and routes a projection of it), and keep disjoint parts of
	// the memo. On two cores, the build then takes about as long as its longer half.
	b := &builder{mesh: m, in: in, memo: memo}
	l := &builder{mesh: m, in: in, memo: memo}
	var res Resources
	var listening sync.WaitGroup
	listening.Go(func() { res.Listeners, res.Routes = l.listenersAndRoutes() })
	res.Clusters = b.clusters()
	res.Endpoints = b.endpoints()
	listening.Wait()
	res.Runtimes = []*runtimev3.Runtime{podListenerLimits(res.Listeners)}
	res.Access = accessByListener(in.pods, m.HopHTTP3)
	b.check("the runtime layer "+ListenerLimitsLayer, res.Runtimes[0])
	// The first error in the order the parts are listed, as one builder would have recorded it.
	b.fail(l.err)
	b.skipped = append(b.skipped, l.skipped...)
	res.Skipped = b.skipNotes() // last: it gathers what every builder recorded
	if b.err == nil && memo != nil {
		memo.sweep()
	}
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
	httpOptionsOf map[meshv1alpha1.Protocol]map[string]*anypb.Any
	// hopHTTP3Of are the packed protocol options of the HTTP clusters whose hop prefers HTTP/3,
	// by SNI (hopHTTP3Options).
	hopHTTP3Of map[string]map[string]*anypb.Any
	// typeURLs are the type URLs pack has spelled, by message name.
	typeURLs map[protoreflect.FullName]string
	// shared are the sub-messages the build's resources share (shared.go).
	shared shared
	// retries are the outbound routes' retry policies and localReplies the inbound connection
	// managers' local reply mappers, made once per build (outcome.go).
	retries      retryPolicies
	localReplies *hcmv3.LocalReplyConfig
	// defaultRoutes are the shared parts of the routes of ports no route is attached to
	// (defaultPortRoutes).
	defaultRoutes *defaultRouteParts
	// answers are the shared parts of the capture virtual hosts' answers (answerRoute).
	answers answerParts
	// upstreamList are the upstream services (upstreams); nil until first read.
	upstreamList []upstream
	// warmSet are the services each source carries up front (warm); nil until first read.
	warmSet warmSet
	// memo holds what the last builds made, to reuse, and records what this one makes; nil for
	// a build afresh that keeps nothing (Build).
	memo *memo
}

// validator is what the generated protoc-gen-validate code gives every Envoy message.
type validator interface{ ValidateAll() error }

// check validates m (every message Build emits or packs passes through it) and records the
// first failure, naming what was being built.
func (b *builder) check(what string, m proto.Message) { b.checkAbout(about{kind: what}, m) }

// about names the message a check or a pack is about. It is spelled only when one fails: a build
// checks some 10^5 messages, and spelling each name up front was a tenth of its allocations.
type about struct{ kind, name, detail string }

// part names a part of what a names.
func (a about) part(p string) about { return about{kind: a.kind, name: a.name, detail: p} }

func (a about) String() string {
	words := []string{a.kind}
	for _, word := range []string{a.name, a.detail} {
		if word != "" {
			words = append(words, word)
		}
	}
	return strings.Join(words, " ")
}

// checkAbout is check with a name spelled only on failure.
func (b *builder) checkAbout(what about, m proto.Message) {
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
	return b.packAbout(about{kind: what}, m)
}

// packAbout is pack with a name spelled only on failure.
func (b *builder) packAbout(what about, m proto.Message) *anypb.Any {
	b.checkAbout(what, m)
	// Deterministic: a map packed in random order would change a listener's bytes between two
	// builds of the same mesh, and Envoy drains a listener whose bytes change.
	value, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil && b.err == nil {
		b.err = fmt.Errorf("xds: packing %s: %w", what, err)
	}
	// anypb.MarshalFrom's type URL, spelled once per message type and build, not once per pack.
	return &anypb.Any{TypeUrl: b.typeURL(m), Value: value}
}

// typeURL is m's type URL in an Any, as anypb.MarshalFrom spells it.
func (b *builder) typeURL(m proto.Message) string {
	name := m.ProtoReflect().Descriptor().FullName()
	if url, ok := b.typeURLs[name]; ok {
		return url
	}
	url := typeURLPrefix + string(name)
	b.typeURLs = store(b.typeURLs, name, url)
	return url
}

// typeURLPrefix is what anypb.MarshalFrom puts before a message's full name.
const typeURLPrefix = "type.googleapis.com/"
