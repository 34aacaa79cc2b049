// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/portspec"
	"github.com/aether-mesh/aether-operator/internal/proxyless"
	"github.com/aether-mesh/aether-operator/internal/registration"
	"github.com/aether-mesh/aether-operator/internal/xds"
	"github.com/aether-mesh/aether-operator/internal/xdsserver"
)

// Proxyless gRPC clients: a pod annotated aether.io/proxyless: "grpc" gets, from the pod webhook,
// a bootstrap that connects its gRPC clients to this agent's proxyless socket as node
// <namespace>/<pod>. For each such client connected (xdsserver.Server.ProxylessNodes), every
// rebuild renders the mesh for its pod's identity (xds.BuildProxyless) and publishes it; the
// server tells the publisher when a client comes or goes (it pokes a rebuild). A client that is
// not a meshed, annotated pod of this node is logged and served nothing.
//
// A proxyless pod's xDS-enabled gRPC server asks the same stream for its server listeners
// (withServerListeners): they are added to its pod's rendering when the pod is a local pod of the
// mesh (xds.BuildProxylessServer).
//
// The server learns each client's pod from its connection (the pod UID of the calling process,
// internal/xdsserver's peer.go) and asks the publisher which pod of this node has that UID
// (callerPod): a client may announce that pod's node ID only. The node's socket asks the same,
// and serves the node Envoy's pods only (xdsserver.NodeEnvoy).

// podUIDField indexes the cache's pods by UID, for callerPod.
const podUIDField = "metadata.uid"

// indexPodUIDs adds podUIDField to the cache's pods.
func indexPodUIDs(ctx context.Context, indexer client.FieldIndexer) error {
	return indexer.IndexField(ctx, &corev1.Pod{}, podUIDField, func(o client.Object) []string {
		return []string{string(o.GetUID())}
	})
}

// callerPod is this node's pod with UID uid; ok is false when the cache holds none
// (xdsserver.NodePods).
func (p *publisher) callerPod(ctx context.Context, uid string) (pod xdsserver.Pod, ok bool, err error) {
	var pods corev1.PodList
	if err := p.cache.List(ctx, &pods, client.MatchingFields{podUIDField: uid}); err != nil {
		return xdsserver.Pod{}, false, fmt.Errorf("listing the pods of node %s by UID: %w", p.node, err)
	}
	for _, found := range pods.Items {
		// Explicit, whatever the cache's field selector holds.
		if found.Spec.NodeName == p.node {
			return xdsserver.Pod{Namespace: found.Namespace, Name: found.Name, Labels: found.Labels}, true, nil
		}
	}
	return xdsserver.Pod{}, false, nil
}

// publishProxyless renders m for every connected proxyless client and publishes it. Clients of one
// identity that announce the same SNI support share one rendering.
func (p *publisher) publishProxyless(ctx context.Context, m model.Mesh) {
	nodes := p.opts.Server.ProxylessNodes()
	identities := make(map[types.NamespacedName]string, len(m.Services))
	for _, s := range m.Services {
		identities[types.NamespacedName{Namespace: s.Namespace, Name: s.Name}] = s.Identity
	}
	built := map[xds.ProxylessClient]xds.Resources{}
	unserved := map[string]string{}
	skipped := map[string]bool{}
	for _, n := range nodes {
		caller, why, err := p.proxylessClient(ctx, n, identities)
		if err != nil {
			p.log.Error(err, "Could not read a proxyless gRPC client's pod; it keeps its configuration until the next rebuild", "node", n.ID)
			continue
		}
		if why != "" {
			unserved[n.ID] = why
			if p.unserved[n.ID] != why {
				p.log.Info("Serving nothing to a proxyless gRPC client", "node", n.ID, "reason", why)
			}
			continue
		}
		res, ok := built[caller]
		if !ok {
			if res, err = xds.BuildProxyless(m, caller); err != nil {
				p.log.Error(err, "Could not build a proxyless gRPC client's configuration; its previous one stays in service",
					"node", n.ID, "identity", caller.Identity)
				continue
			}
			built[caller] = res
		}
		for _, note := range res.Skipped {
			if skipped[note] = true; !p.proxylessSkipped[note] {
				p.log.V(1).Info("Left out of a proxyless gRPC client's configuration", "node", n.ID, "reason", note)
			}
		}
		if res, err = p.withServerListeners(m, n.ID, res); err != nil {
			p.log.Error(err, "Could not build a proxyless gRPC server's listeners; its previous configuration stays in service", "node", n.ID)
			continue
		}
		// An error is the server's to log and count (an inconsistent snapshot); the previous stays.
		_, _ = p.opts.Server.PublishProxyless(n.ID, res)
	}
	p.unserved, p.proxylessSkipped = unserved, skipped
}

// proxylessClient is the client connected as n, or why it is served nothing: it must be a meshed
// pod of this node, annotated aether.io/proxyless: "grpc", whose MeshService has an identity.
func (p *publisher) proxylessClient(ctx context.Context, n xdsserver.ProxylessNode,
	identities map[types.NamespacedName]string) (xds.ProxylessClient, string, error) {
	namespace, name, _ := proxyless.ParseNodeID(n.ID) // the server registers only IDs that parse
	pod := &corev1.Pod{}
	if err := p.cache.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, pod); apierrors.IsNotFound(err) {
		return xds.ProxylessClient{}, fmt.Sprintf("no pod %s/%s runs on node %s", namespace, name, p.node), nil
	} else if err != nil {
		return xds.ProxylessClient{}, "", err
	}
	// Explicit, whatever the cache's field selector holds.
	if pod.Spec.NodeName != p.node {
		return xds.ProxylessClient{}, fmt.Sprintf("pod %s/%s runs on node %q, not %s", namespace, name, pod.Spec.NodeName, p.node), nil
	}
	if !p.ignored.InMesh(pod) {
		return xds.ProxylessClient{}, fmt.Sprintf("pod %s/%s is not in the mesh (it needs the label %s: %q, in a namespace the mesh takes)",
			namespace, name, portspec.LabelManaged, portspec.ManagedValue), nil
	}
	spec, err := portspec.Parse(pod.Annotations)
	switch {
	case err != nil:
		return xds.ProxylessClient{}, fmt.Sprintf("pod %s/%s: its mesh annotations do not parse: %v", namespace, name, err), nil
	case spec.Proxyless != portspec.ProxylessGRPC:
		return xds.ProxylessClient{}, fmt.Sprintf("pod %s/%s is not annotated %s: %q", namespace, name,
			portspec.AnnotationProxyless, portspec.ProxylessGRPC), nil
	}
	service := registration.ServiceAccount(pod)
	identity := identities[types.NamespacedName{Namespace: namespace, Name: service}]
	if identity == "" {
		return xds.ProxylessClient{}, fmt.Sprintf("pod %s/%s: its MeshService %s has no identity yet", namespace, name, service), nil
	}
	return xds.ProxylessClient{Identity: identity, SNI: n.SNI}, "", nil
}

// withServerListeners is res (a client's rendering, shared) with the server listeners of the
// proxyless pod node ID id names, when it is one of m's local pods (registered, verified, with an
// identity): an xDS-enabled gRPC server of that pod (xds.NewGRPCServer) asks for them, and then
// terminates mTLS and enforces its ports' AccessPolicies itself. A server that is not xDS-enabled
// asks for none, and is not affected.
func (p *publisher) withServerListeners(m model.Mesh, id string, res xds.Resources) (xds.Resources, error) {
	namespace, name, _ := proxyless.ParseNodeID(id)
	i := slices.IndexFunc(m.Pods, func(lp model.LocalPod) bool { return lp.Namespace == namespace && lp.Name == name })
	if i < 0 {
		return res, nil
	}
	server, err := xds.BuildProxylessServer(m, m.Pods[i])
	if err != nil || len(server.Listeners) == 0 {
		return res, err
	}
	if p.opts.serverHook != nil {
		p.opts.serverHook(&server)
	}
	// A copy: res may be shared by other clients of the same identity.
	res.Listeners = slices.SortedFunc(slices.Values(slices.Concat(res.Listeners, server.Listeners)), func(a, b *listenerv3.Listener) int {
		return cmp.Compare(a.GetName(), b.GetName())
	})
	return res, nil
}
