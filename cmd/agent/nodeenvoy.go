// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/aether-mesh/aether-operator/internal/xdsserver"
)

// defaultNodeEnvoyPods selects the node Envoy's pods: the label config/envoy's DaemonSet gives them.
const defaultNodeEnvoyPods = "app.kubernetes.io/name=aether-envoy"

// nodeEnvoy reads --node-envoy-pods and --node-envoy-host into who the node's xDS socket serves
// (xdsserver.NodeEnvoy): the pods of this node in the agent's own namespace (POD_NAMESPACE,
// namespace; none without it) that the selector pods selects, and the node's own processes with
// host. A selector that does not parse is refused, and so is a TCP --xds-address without host:
// its connections carry no peer credentials, so no caller could be told to be the node's Envoy.
func nodeEnvoy(pods string, host bool, namespace string, xdsAddr xdsserver.Address) (xdsserver.NodeEnvoy, error) {
	who := xdsserver.NodeEnvoy{Host: host}
	if pods != "" {
		selector, err := labels.Parse(pods)
		if err != nil {
			return who, fmt.Errorf("--node-envoy-pods %q: %w; write a label selector, e.g. %s (config/envoy's DaemonSet's pods), or \"\" for no pod", pods, err, defaultNodeEnvoyPods)
		}
		if selector.Empty() {
			return who, fmt.Errorf("--node-envoy-pods %q selects every pod of the agent's namespace; name the node Envoy's label, e.g. %s, or \"\" for no pod", pods, defaultNodeEnvoyPods)
		}
		who.Namespace, who.Pods = namespace, selector
	}
	if xdsAddr.Network == "tcp" && !host {
		return who, fmt.Errorf("--xds-address %s is a TCP port, whose connections carry no peer credentials: the agent cannot tell the node's Envoy from "+
			"another caller there; use a unix socket, or set --node-envoy-host=true to serve whoever reaches the port (a development node)", xdsAddr)
	}
	return who, nil
}
