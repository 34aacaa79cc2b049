// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xds

import (
	"maps"
	"slices"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	ondemandv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/on_demand/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/resolve"
)

// Demand-scoped distribution (DESIGN section 8, Distribution). With model.UpstreamsDeclared a
// node carries, per local identity, the clusters and load assignments of its warm services only:
//
//   - its own services (those of its pods: a pod's own service never needs declaring);
//   - the services its pods declare in config.aether.io/upstreams, read by resolve.DeclaredService
//     (the names that reach a service from the pod's namespace);
//   - the backends of the HTTPRoutes and GRPCRoutes attached to those, and of every TCPRoute and
//     TLSRoute (a tcp_proxy that splits by weight has no on-demand path, so its backends are
//     always carried);
//   - what it asked for on demand and still uses (model.Mesh.Demanded).
//
// Listeners and routes are the same in both modes but for the on-demand configuration: every
// virtual host and capture chain still names its cluster, so a request to a service that is not
// carried names a cluster Envoy does not have, and Envoy asks for it over ADS (on-demand cluster
// discovery, delta xDS: resource_names_subscribe) and waits up to OnDemandTimeout. The agent
// answers from the full model (Demand). The on-demand configuration does not depend on what is
// carried, so a fetch changes no listener (Envoy drains a listener whose bytes change).

// OnDemandTimeout is how long a request waits for a cluster fetched on demand: a name under the
// mesh domain that is no service fails after it (Envoy's on-demand filter answers 503). The
// agent answers within one rebuild (its debounce, some 100 ms), so 2 s is ample.
const OnDemandTimeout = 2 * time.Second

// AssignmentFetchTimeout is, on a node that fetches on demand, how long a cluster Envoy adds waits
// for its load assignment (its EDS config's initial_fetch_timeout; Envoy's default is 15 s) before
// it warms with the copy Envoy already holds (Envoy's EDS cache), or none. A load assignment's
// name carries no source, so a service fetched for a second identity reads one the stream already
// delivered, and Envoy subscribes to a name once: nothing new is asked for. The agent's xDS server
// sends the assignment again with each new reader (xdsserver: a load assignment's delta version
// names its readers), but a delta stream may deliver it before the cluster, when the cluster
// update waits for the acknowledgement of the previous one (fetches come in bursts); the cluster
// then waits this long. Measured with a live Envoy 1.40: at the default, every request of the
// second identity failed at OnDemandTimeout for 15 s (test/envoy's live walk). Short of
// OnDemandTimeout by the agent's answer (one rebuild); a fresh assignment is delivered in the
// same round trip as its cluster, well within it.
const AssignmentFetchTimeout = 500 * time.Millisecond

// OnDemandFilter is the HTTP filter of on-demand cluster discovery.
const OnDemandFilter = "envoy.filters.http.on_demand"

// onDemand reports whether the node fetches the services it does not carry on demand.
func (b *builder) onDemand() bool { return b.mesh.Upstreams.OnDemand() }

// odcdsSource is where Envoy asks for a cluster on demand: the ADS stream (delta xDS, which the
// bootstrap selects in this mode: on-demand discovery needs it).
func odcdsSource() *corev3.ConfigSource { return adsSource() }

// onDemandHTTPFilter is the on-demand filter of the capture and proxy HCMs, before the router:
// a route whose cluster the node does not carry pauses until Envoy has fetched it, or
// OnDemandTimeout has passed.
func (b *builder) onDemandHTTPFilter() *hcmv3.HttpFilter {
	return &hcmv3.HttpFilter{
		Name: OnDemandFilter,
		ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: b.pack("the on-demand filter", &ondemandv3.OnDemand{
			Odcds: &ondemandv3.OnDemandCds{Source: odcdsSource(), Timeout: durationpb.New(OnDemandTimeout)},
		})},
	}
}

// tcpOnDemand is a single-cluster capture tcp_proxy's on-demand configuration: a connection to a
// cluster the node does not carry waits for Envoy to fetch it. (Envoy reads the timeout as its
// own default where it does not implement it.)
func tcpOnDemand() *tcpproxyv3.TcpProxy_OnDemand {
	return &tcpproxyv3.TcpProxy_OnDemand{OdcdsConfig: odcdsSource(), Timeout: durationpb.New(OnDemandTimeout)}
}

// warmSet is, per source identity, the keys (ServiceKey) of the services it carries up front;
// nil when every service is carried (UpstreamsAll).
type warmSet map[string]map[string]bool

// carriesFor reports whether source carries the service key up front.
func (w warmSet) carriesFor(source, key string) bool { return w == nil || w[source][key] }

// carriedByAny reports whether some source carries the service key up front.
func (w warmSet) carriedByAny(key string) bool {
	if w == nil {
		return true
	}
	for _, keys := range w {
		if keys[key] {
			return true
		}
	}
	return false
}

// warm is the build's warmSet (computed once, read by the cluster and endpoint builders).
func (b *builder) warm() warmSet {
	if !b.onDemand() {
		return nil
	}
	if b.warmSet == nil {
		b.warmSet = WarmServices(b.mesh, b.in.pods)
	}
	return b.warmSet
}

// WarmServices are, per identity of pods, the keys (ServiceKey) of the services it carries up
// front under model.UpstreamsDeclared: see the comment at the top of this file. Services are
// matched to a declaration by resolve.DeclaredService, the dial surface's names.
func WarmServices(m model.Mesh, pods []model.LocalPod) map[string]map[string]bool {
	services := make(map[string]bool, len(m.Services))
	for _, s := range m.Services {
		services[ServiceKey(s.Name, s.Namespace)] = true
	}
	out := map[string]map[string]bool{}
	for _, p := range pods {
		keys := out[p.Identity]
		if keys == nil {
			keys = map[string]bool{}
			out[p.Identity] = keys
		}
		if own := ServiceKey(p.Service, p.Namespace); services[own] {
			keys[own] = true
		}
		for _, u := range p.Upstreams {
			if declared := ServiceKey(resolve.DeclaredService(u, p.Namespace)); services[declared] {
				keys[declared] = true
			}
		}
	}
	for identity, keys := range out {
		for _, key := range m.Demanded[identity] {
			keys[key] = true
		}
	}
	for _, keys := range out {
		for _, r := range m.Routes {
			if !slices.Contains(tcpKinds, r.Kind) && !slices.ContainsFunc(r.Parents, func(p model.ServiceRef) bool {
				return keys[ServiceKey(p.Name, p.Namespace)]
			}) {
				continue
			}
			for _, rule := range r.Rules {
				for _, be := range rule.Backends {
					keys[ServiceKey(be.Name, be.Namespace)] = true
				}
			}
		}
	}
	return out
}

// Demand reads an on-demand request for the cluster named cluster, as Envoy sends it for a
// cluster a route or chain names and the node does not carry: the local identity that dials
// through it (the name's source qualification) and the service it reaches (ServiceKey), when m
// has both. The answer is then a build of m with the service demanded by the identity
// (WithDemand), which carries that cluster: any mesh service can be answered for, not only those
// carried. ok is false for a name of no such cluster (a service deleted since the configuration
// named it, an identity with no pod on the node): that request goes unanswered, and Envoy fails
// it after its timeout.
func Demand(m model.Mesh, cluster string) (identity, service string, ok bool) {
	t, mesh := ParseCluster(cluster)
	if !mesh || t.Inbound {
		return "", "", false
	}
	identity, ok = SourceIdentity(m.Domain, t.SourceKey)
	if !ok || !slices.ContainsFunc(m.Pods, func(p model.LocalPod) bool { return p.Identity == identity }) {
		return "", "", false
	}
	name, namespace, ok := ParseFQDN(t.FQDN, m.Domain)
	if !ok || !slices.ContainsFunc(m.Services, func(s model.Service) bool { return s.Namespace == namespace && s.Name == name }) {
		return "", "", false
	}
	return identity, ServiceKey(name, namespace), true
}

// WithDemand is m with service (ServiceKey) among identity's Demanded; m is not modified.
func WithDemand(m model.Mesh, identity, service string) model.Mesh {
	demanded := make(map[string][]string, len(m.Demanded)+1)
	maps.Copy(demanded, m.Demanded)
	if !slices.Contains(demanded[identity], service) {
		keys := append(slices.Clone(demanded[identity]), service)
		slices.Sort(keys)
		demanded[identity] = keys
	}
	m.Demanded = demanded
	return m
}
