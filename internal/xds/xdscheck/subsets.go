// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdscheck

import (
	"fmt"
	"slices"
	"strings"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	h2mv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/header_to_metadata/v3"
	"google.golang.org/protobuf/proto"

	"github.com/aether-mesh/aether-operator/internal/portspec"
	"github.com/aether-mesh/aether-operator/internal/xds"
)

// What the subset gate holds the rendering to, written from the workload page ("Subset routing
// and locality"): the pins x-aether-ip and x-aether-pod, the subset headers
// x-aether-subset-<key>, strict selection, and up to four keys combining.
const (
	lbNamespace    = "envoy.lb"
	pinIPHeader    = "x-aether-ip"
	pinPodHeader   = "x-aether-pod"
	subsetPrefix   = "x-aether-subset-"
	maxCombineKeys = 4
	ipKey          = "ip"
	podKey         = "pod"
)

// pins are the pin headers and the envoy.lb key each sets.
var pins = map[string]string{pinIPHeader: ipKey, pinPodHeader: podKey}

// Subsets checks subset routing:
//   - no host publishes a reserved key (portspec: ip, pod, cluster, namespace) but ip, its own
//     address, and pod;
//   - a cluster's lb_subset_config balances over every endpoint when no selector holds the
//     request's keys (ANY_ENDPOINT), and each selector is strict (NO_FALLBACK: a pin or a subset
//     without endpoints fails, never spills); a pin's key is alone in its selector or with the
//     other pin's; a selector combines at most four keys;
//   - an HTTP cluster (it carries HTTP protocol options) whose hosts publish keys has selectors
//     for ip, pod and each key alone, and for ip and pod together (both pins);
//   - every header-to-metadata configuration maps exactly the x-aether-* headers, each into
//     envoy.lb under its own key, the pins always;
//   - a virtual host that routes to a cluster with subset keys maps exactly those keys' headers
//     (its per-filter configuration), so each key the cluster selects on is reachable.
func Subsets(res xds.Resources) []string {
	var out []string
	published := map[string][]string{} // load assignment → the keys its hosts publish
	for _, cla := range res.Endpoints {
		at := resourceAt("load assignment", cla.GetClusterName())
		for _, l := range cla.GetEndpoints() {
			for _, h := range l.GetLbEndpoints() {
				fields := h.GetMetadata().GetFilterMetadata()[lbNamespace].GetFields()
				address := h.GetEndpoint().GetAddress().GetSocketAddress().GetAddress()
				for k, v := range fields {
					switch {
					case k == ipKey && v.GetStringValue() != address:
						out = append(out, fmt.Sprintf("%s: host %s says ip %q: a pin to it would land elsewhere", at, address, v.GetStringValue()))
					case k == ipKey || k == podKey:
					case portspec.ReservedMetadataKey(k):
						out = append(out, fmt.Sprintf("%s: host %s publishes the reserved key %q", at, address, k))
					default:
						if !slices.Contains(published[cla.GetClusterName()], k) {
							published[cla.GetClusterName()] = append(published[cla.GetClusterName()], k)
						}
					}
				}
			}
		}
	}
	selectorKeys := map[string][]string{} // cluster → the published keys its selectors hold
	for _, c := range res.Clusters {
		at := resourceAt("cluster", c.GetName())
		sc := c.GetLbSubsetConfig()
		keys := published[cmpOr(c.GetEdsClusterConfig().GetServiceName(), c.GetName())]
		if sc == nil {
			if len(keys) > 0 && c.GetTypedExtensionProtocolOptions()[httpOptionsKey] != nil {
				out = append(out, fmt.Sprintf("%s: its hosts publish %q but it has no lb_subset_config: x-aether-subset-* would be ignored", at, keys))
			}
			continue
		}
		out = append(out, subsetConfig(at, sc, keys)...)
		for _, s := range sc.GetSubsetSelectors() {
			for _, k := range s.GetKeys() {
				if k != ipKey && k != podKey && !slices.Contains(selectorKeys[c.GetName()], k) {
					selectorKeys[c.GetName()] = append(selectorKeys[c.GetName()], k)
				}
			}
		}
	}
	out = append(out, walkHeaderRules(res)...)
	for _, rc := range res.Routes {
		for _, vh := range rc.GetVirtualHosts() {
			out = append(out, virtualHostKeys(resourceAt("route configuration", rc.GetName()), vh, selectorKeys)...)
		}
	}
	return out
}

// httpOptionsKey is where a cluster carries its upstream HTTP protocol options.
const httpOptionsKey = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// subsetConfig checks one cluster's lb_subset_config; keys are what its hosts publish.
func subsetConfig(at string, sc *clusterv3.Cluster_LbSubsetConfig, keys []string) []string {
	var out []string
	if sc.GetFallbackPolicy() != clusterv3.Cluster_LbSubsetConfig_ANY_ENDPOINT {
		out = append(out, fmt.Sprintf("%s: lb_subset_config falls back %s, not ANY_ENDPOINT: a request without subset headers would not be balanced over the service", at, sc.GetFallbackPolicy()))
	}
	alone := map[string]bool{}
	pinned := false // a selector holds both pins
	for i, s := range sc.GetSubsetSelectors() {
		sat := fmt.Sprintf("%s: subset_selectors[%d] %q", at, i, s.GetKeys())
		if s.GetFallbackPolicy() != clusterv3.Cluster_LbSubsetConfig_LbSubsetSelector_NO_FALLBACK {
			out = append(out, fmt.Sprintf("%s falls back %s, not NO_FALLBACK: a pin or subset without endpoints would spill onto the rest of the service", sat, s.GetFallbackPolicy()))
		}
		if len(s.GetKeys()) > maxCombineKeys {
			out = append(out, fmt.Sprintf("%s combines %d keys; at most %d combine", sat, len(s.GetKeys()), maxCombineKeys))
		}
		bothPins := slices.Equal(s.GetKeys(), []string{ipKey, podKey})
		if bothPins {
			pinned = true
		}
		for _, k := range s.GetKeys() {
			switch {
			case (k == ipKey || k == podKey) && len(s.GetKeys()) > 1 && !bothPins:
				out = append(out, fmt.Sprintf("%s combines the pin %q with other keys: a pin combines with the other pin only", sat, k))
			case k != ipKey && k != podKey && portspec.ReservedMetadataKey(k):
				out = append(out, fmt.Sprintf("%s selects on the reserved key %q", sat, k))
			}
		}
		if len(s.GetKeys()) == 1 {
			alone[s.GetKeys()[0]] = true
		}
	}
	for _, k := range append([]string{ipKey, podKey}, keys...) {
		if !alone[k] {
			out = append(out, fmt.Sprintf("%s: no selector holds %q alone: a request selecting it alone would balance over the whole service", at, k))
		}
	}
	if !pinned {
		out = append(out, fmt.Sprintf("%s: no selector holds %q and %q together: a request with both pins would balance over the whole service", at, ipKey, podKey))
	}
	return out
}

// walkHeaderRules checks every header-to-metadata configuration, wherever it is (an HCM's
// filter or a per-filter configuration).
func walkHeaderRules(res xds.Resources) []string {
	var out []string
	out = append(out, walk(res, func(at string, m proto.Message, _ bool) {
		c, ok := m.(*h2mv3.Config)
		if !ok {
			return
		}
		if len(c.GetResponseRules()) > 0 {
			out = append(out, at+": header-to-metadata has response rules")
		}
		set := map[string]bool{}
		for _, r := range c.GetRequestRules() {
			out = append(out, headerRule(at, r)...)
			set[r.GetHeader()] = true
		}
		for h := range pins {
			if !set[h] {
				out = append(out, fmt.Sprintf("%s: header-to-metadata does not map %s: the pin would be ignored", at, h))
			}
		}
	})...)
	return out
}

// headerRule checks one rule: an x-aether-* header copied, when present, into envoy.lb under
// its own key.
func headerRule(at string, r *h2mv3.Config_Rule) []string {
	h := r.GetHeader()
	want, pin := pins[h]
	if !pin {
		key, ok := strings.CutPrefix(h, subsetPrefix)
		if !ok || key == "" || portspec.ReservedMetadataKey(key) {
			return []string{fmt.Sprintf("%s: header-to-metadata maps %q: only x-aether-ip, x-aether-pod and x-aether-subset-<key> (a key not reserved) are mapped", at, h)}
		}
		want = key
	}
	p := r.GetOnHeaderPresent()
	switch {
	case r.GetCookie() != "" || r.GetOnHeaderMissing() != nil:
		return []string{fmt.Sprintf("%s: header-to-metadata rule for %s sets metadata without the header", at, h)}
	case p.GetMetadataNamespace() != lbNamespace || p.GetKey() != want || p.GetValue() != "" || p.GetRegexValueRewrite() != nil ||
		p.GetType() != h2mv3.Config_STRING || p.GetEncode() != h2mv3.Config_NONE:
		return []string{fmt.Sprintf("%s: header-to-metadata rule for %s does not copy its value as a string into %s under %q", at, h, lbNamespace, want)}
	}
	return nil
}

// virtualHostKeys checks that vh maps the subset keys of each cluster it routes to.
func virtualHostKeys(at string, vh *routev3.VirtualHost, selectorKeys map[string][]string) []string {
	var want []string
	for _, r := range vh.GetRoutes() {
		a := r.GetRoute()
		names := []string{a.GetCluster()}
		for _, w := range a.GetWeightedClusters().GetClusters() {
			names = append(names, w.GetName())
		}
		for _, n := range names {
			for _, k := range selectorKeys[n] {
				if !slices.Contains(want, k) {
					want = append(want, k)
				}
			}
		}
	}
	if len(want) == 0 {
		return nil
	}
	var have []string
	if a := vh.GetTypedPerFilterConfig()[xds.HeaderToMetadataFilter]; a != nil {
		c := &h2mv3.Config{}
		if err := a.UnmarshalTo(c); err != nil {
			return []string{fmt.Sprintf("%s: virtual_hosts[%s]: header-to-metadata configuration: %v", at, vh.GetName(), err)}
		}
		for _, r := range c.GetRequestRules() {
			if k, ok := strings.CutPrefix(r.GetHeader(), subsetPrefix); ok {
				have = append(have, k)
			}
		}
	}
	slices.Sort(want)
	slices.Sort(have)
	if !slices.Equal(want, have) {
		return []string{fmt.Sprintf("%s: virtual_hosts[%s] maps the subset keys %q; its clusters select on %q", at, vh.GetName(), have, want)}
	}
	return nil
}
