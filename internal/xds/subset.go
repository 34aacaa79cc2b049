// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xds

import (
	"maps"
	"slices"
	"strings"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	h2mv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/header_to_metadata/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/aether-mesh/aether-operator/internal/model"
)

// Subset routing: a request chooses which endpoints of a service it may land on with headers.
//
//   - x-aether-ip: <ip> and x-aether-pod: <pod> pin one endpoint: exactly it, or 503. Both
//     together pin the endpoint both name: exactly it, or 503 when they name two (or none).
//   - x-aether-subset-<key>: <value> selects the endpoints that publish <key> with <value>
//     (metadata.endpoint.aether.io/<key>), strictly: no such endpoint is a 503, never the rest of
//     the service. Several such headers intersect.
//   - A pin mixed with subset headers, or a set of keys no selector holds, balances normally, as
//     does a request without any of these headers.
//
// Envoy cannot template a route's metadata_match from a header, so the headers become request
// metadata on the way: the capture HCM runs the header-to-metadata filter before the router,
// each rule copying one header into the envoy.lb namespace of the request's dynamic metadata
// (the HCM's own configuration holds the pins, each service's virtual host a per-route
// configuration that adds its own keys). The router merges the envoy.lb dynamic metadata into the
// route's metadata match criteria, which the subset load balancer of the upstream cluster reads:
// each HTTP mesh cluster has an lb_subset_config whose selectors are ip and pod alone and the
// combinations of the service's published keys, each NO_FALLBACK (a selector that matches the
// request's keys but no endpoint is a 503), and ANY_ENDPOINT when no selector has exactly the
// request's keys (no header, a pin mixed with a subset, keys that do not combine). Each host
// carries its ip, its pod's name and its published metadata under envoy.lb (EDS).
const (
	// LBMetadataNamespace is where the subset load balancer reads an endpoint's metadata and the
	// router a request's.
	LBMetadataNamespace = "envoy.lb"
	// HeaderPinIP and HeaderPinPod pin a request to one endpoint, by address or by pod name.
	HeaderPinIP  = "x-aether-ip"
	HeaderPinPod = "x-aether-pod"
	// SubsetHeaderPrefix prefixes a subset header: x-aether-subset-<key>.
	SubsetHeaderPrefix = "x-aether-subset-"
	// SubsetKeyIP and SubsetKeyPod are the metadata keys the pins set: reserved, no endpoint
	// publishes them (portspec).
	SubsetKeyIP  = "ip"
	SubsetKeyPod = "pod"
	// MaxCombinedSubsetKeys is how many of a service's keys combine (the first, sorted): every
	// non-empty combination of them is a selector, 15 at most. Each further key selects alone.
	// Envoy makes a subset per selector and distinct values, so the combinations are capped.
	MaxCombinedSubsetKeys = 4
)

// subsetSelectorKeys are the key sets of the selectors of a service publishing keys (sorted):
// ip and pod alone and together (both pins: one more subset per endpoint, as each alone), every non-empty combination of the first MaxCombinedSubsetKeys keys (by
// size, then in key order), then each further key alone. Each set is sorted.
func subsetSelectorKeys(keys []string) [][]string {
	out := [][]string{{SubsetKeyIP}, {SubsetKeyPod}, {SubsetKeyIP, SubsetKeyPod}}
	combined := keys[:min(len(keys), MaxCombinedSubsetKeys)]
	var combos [][]string
	for mask := 1; mask < 1<<len(combined); mask++ {
		var set []string
		for i, k := range combined {
			if mask&(1<<i) != 0 {
				set = append(set, k)
			}
		}
		combos = append(combos, set)
	}
	slices.SortStableFunc(combos, func(a, b []string) int {
		if len(a) != len(b) {
			return len(a) - len(b)
		}
		return slices.Compare(a, b)
	})
	out = append(out, combos...)
	for _, k := range keys[len(combined):] {
		out = append(out, []string{k})
	}
	return out
}

// subsetConfig is the lb_subset_config of an HTTP mesh cluster of a service publishing keys.
func subsetConfig(keys []string) *clusterv3.Cluster_LbSubsetConfig {
	sets := subsetSelectorKeys(keys)
	selectors := make([]*clusterv3.Cluster_LbSubsetConfig_LbSubsetSelector, len(sets))
	for i, set := range sets {
		selectors[i] = &clusterv3.Cluster_LbSubsetConfig_LbSubsetSelector{
			Keys: set, FallbackPolicy: clusterv3.Cluster_LbSubsetConfig_LbSubsetSelector_NO_FALLBACK,
		}
	}
	return &clusterv3.Cluster_LbSubsetConfig{
		FallbackPolicy:  clusterv3.Cluster_LbSubsetConfig_ANY_ENDPOINT,
		SubsetSelectors: selectors,
	}
}

// subsetConfigOf is subsetConfig(keys), made and checked once per key set and build, shared.
func (b *builder) subsetConfigOf(what about, keys []string) *clusterv3.Cluster_LbSubsetConfig {
	k := strings.Join(keys, ",")
	if c, ok := b.shared.subsets[k]; ok {
		return c
	}
	c := subsetConfig(keys)
	b.checkAbout(what.part("subset config"), c)
	b.shared.subsets = store(b.shared.subsets, k, c)
	return c
}

// hostMetadata is what a member's host says under envoy.lb: its address (ip), its pod's name
// (pod) and the metadata it publishes.
func hostMetadata(m *model.Member) *corev3.Metadata {
	fields := make(map[string]*structpb.Value, len(m.Metadata)+2)
	for k, v := range m.Metadata {
		fields[k] = structpb.NewStringValue(v)
	}
	// Set last: a reserved key a MeshEndpoint carries anyway never overrides them.
	fields[SubsetKeyIP] = structpb.NewStringValue(m.Address)
	fields[SubsetKeyPod] = structpb.NewStringValue(m.Name)
	return &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{LBMetadataNamespace: {Fields: fields}}}
}

// SubsetHeaderRules are the header-to-metadata rules for a service publishing keys: the pins,
// then x-aether-subset-<key> for each key, each copying the header's value into envoy.lb.
func SubsetHeaderRules(keys []string) []*h2mv3.Config_Rule {
	rules := []*h2mv3.Config_Rule{headerRule(HeaderPinIP, SubsetKeyIP), headerRule(HeaderPinPod, SubsetKeyPod)}
	for _, k := range keys {
		rules = append(rules, headerRule(SubsetHeaderPrefix+k, k))
	}
	return rules
}

// headerRule copies header, when present, into envoy.lb under key.
func headerRule(header, key string) *h2mv3.Config_Rule {
	return &h2mv3.Config_Rule{Header: header, OnHeaderPresent: &h2mv3.Config_KeyValuePair{
		MetadataNamespace: LBMetadataNamespace, Key: key, Type: h2mv3.Config_STRING,
	}}
}

// HeaderToMetadataFilter is the name of the header-to-metadata HTTP filter.
const HeaderToMetadataFilter = "envoy.filters.http.header_to_metadata"

// subsetHeaderConfig is the packed per-route header-to-metadata configuration of a service
// publishing keys (nil when it publishes none: the HCM's own configuration holds the pins).
func (b *builder) subsetHeaderConfig(what string, keys []string) map[string]*anypb.Any {
	if len(keys) == 0 {
		return nil
	}
	k := strings.Join(keys, ",")
	if c, ok := b.shared.headerConfigs[k]; ok {
		return c
	}
	c := map[string]*anypb.Any{HeaderToMetadataFilter: b.pack(what+" header-to-metadata", &h2mv3.Config{RequestRules: SubsetHeaderRules(keys)})}
	b.shared.headerConfigs = store(b.shared.headerConfigs, k, c)
	return c
}

// captureFilters are the capture HCM's HTTP filters: header-to-metadata with the pins (a virtual
// host of a service publishing keys replaces it with its own, subsetHeaderConfig), then the
// on-demand filter when the node fetches what it does not carry (warm.go), then the router.
func (b *builder) captureFilters() []*hcmv3.HttpFilter {
	filters := []*hcmv3.HttpFilter{{
		Name: HeaderToMetadataFilter,
		ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: b.pack("the header-to-metadata filter",
			&h2mv3.Config{RequestRules: SubsetHeaderRules(nil)})},
	}}
	if b.onDemand() {
		filters = append(filters, b.onDemandHTTPFilter())
	}
	return append(filters, b.routerFilters()...)
}

// metadataKey spells metadata whole, in key order (a NUL cannot occur in a key or a value an
// annotation carries): two members' hosts are one only when their metadata are equal.
func metadataKey(metadata map[string]string) string {
	if len(metadata) == 0 {
		return ""
	}
	var k strings.Builder
	for _, key := range slices.Sorted(maps.Keys(metadata)) {
		k.WriteString(key + "\x00" + metadata[key] + "\x00")
	}
	return k.String()
}
