// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"strings"
	"testing"

	"github.com/aether-mesh/aether-operator/internal/xdsserver"
)

// TestNodeEnvoyFlags: --node-envoy-pods and --node-envoy-host as the agent reads them: the
// default selects the node Envoy's pods in the agent's namespace; a selector that does not parse,
// one that selects every pod, and a TCP --xds-address without --node-envoy-host are refused naming
// the flag, the value and the fix.
func TestNodeEnvoyFlags(t *testing.T) {
	unix := xdsserver.Address{Network: "unix", Path: "/var/run/aether/proxy/xds.sock"}
	tcp := xdsserver.Address{Network: "tcp", Path: "127.0.0.1:18000"}
	who, err := nodeEnvoy(defaultNodeEnvoyPods, false, "aether-operator-system", unix)
	if err != nil || who.Host || who.Namespace != "aether-operator-system" || who.Pods.String() != defaultNodeEnvoyPods {
		t.Errorf("the default: %+v, %v; want the node Envoy's pods of the agent's namespace, no node process", who, err)
	}
	if who, err := nodeEnvoy("", true, "", tcp); err != nil || !who.Host || who.Pods != nil {
		t.Errorf("no pods, the node's processes, over TCP: %+v, %v", who, err)
	}
	for _, tc := range []struct {
		pods string
		host bool
		addr xdsserver.Address
		want []string
	}{
		{"app.kubernetes.io/name in (aether-envoy", false, unix, []string{`--node-envoy-pods "app.kubernetes.io/name in (aether-envoy"`, defaultNodeEnvoyPods}},
		{" ", false, unix, []string{`--node-envoy-pods " " selects every pod`, defaultNodeEnvoyPods}},
		{defaultNodeEnvoyPods, false, tcp, []string{"--xds-address tcp://127.0.0.1:18000 is a TCP port", "--node-envoy-host=true"}},
	} {
		_, err := nodeEnvoy(tc.pods, tc.host, "aether-operator-system", tc.addr)
		for _, w := range tc.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("nodeEnvoy(%q, %v, %s): %v; want an error naming %q", tc.pods, tc.host, tc.addr, err, w)
			}
		}
	}
}
