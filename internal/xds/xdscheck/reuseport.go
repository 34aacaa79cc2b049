// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdscheck

import (
	"fmt"

	"github.com/aether-mesh/aether-operator/internal/xds"
)

// ReusePort checks that every listener bound to a socket sets enable_reuse_port: true. The node's
// proxy is replaced by binding a new one beside the old (SO_REUSEPORT on the same address in each
// pod's namespace) and draining the old (config/envoy): a listener without it cannot be bound
// twice, so the new proxy cannot take it until the old one closes it, and a pod's connections
// are refused in between. An API listener (a proxyless client's) binds nothing and is left out.
func ReusePort(res xds.Resources) []string {
	var out []string
	for _, l := range res.Listeners {
		if l.GetApiListener() != nil || l.GetAddress().GetSocketAddress() == nil {
			continue
		}
		if !l.GetEnableReusePort().GetValue() {
			out = append(out, fmt.Sprintf("%s: enable_reuse_port is not true (%s): a new node proxy cannot bind %s beside the old one while it drains, and the pod's connections are refused in between; set enable_reuse_port: true",
				resourceAt("listener", l.GetName()), reusePortSetting(l.GetEnableReusePort() != nil), l.GetAddress().GetSocketAddress().GetAddress()))
		}
	}
	return out
}

// reusePortSetting says whether enable_reuse_port was unset or set false.
func reusePortSetting(set bool) string {
	if set {
		return "set false"
	}
	return "unset, Envoy's default, which a runtime flag turns off"
}
