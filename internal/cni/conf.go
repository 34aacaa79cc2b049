// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package cni

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"time"

	"github.com/aether-mesh/aether-operator/internal/registration"
)

// PluginType is the plugin's type in a conflist, and its binary's name in the CNI bin dir.
const PluginType = "aether-cni"

// DefaultTimeout bounds one call of the plugin to the agent (and, when the agent cannot be
// reached, the plugin's own read of the pod): the kubelet retries a failed ADD, so a short wait
// that fails is better than a long one.
const DefaultTimeout = 5 * time.Second

// Entry is the plugin's object in the node's conflist: what the installer writes, after the
// other plugins. Paths are the host's: the plugin runs on the host.
type Entry struct {
	// Type is PluginType.
	Type string `json:"type"`
	// AgentSocket is the agent's unix socket (DefaultSocket if empty).
	AgentSocket string `json:"agentSocket,omitempty"`
	// Kubeconfig is the kubeconfig the agent keeps for the plugin, read only when the agent cannot
	// be reached. Empty: the plugin cannot read a pod then, and fails ADD for every pod outside
	// IgnoredNamespaces.
	Kubeconfig string `json:"kubeconfig,omitempty"`
	// Timeout bounds each call (a Go duration: "5s"; DefaultTimeout if empty).
	Timeout string `json:"timeout,omitempty"`
	// IgnoredNamespaces pass straight through, without a call to the agent: the mesh never takes
	// their pods (the agent's --ignored-namespaces and its own namespace). Nil: the defaults
	// (registration.DefaultIgnoredNamespaces).
	IgnoredNamespaces []string `json:"ignoredNamespaces,omitempty"`
}

// PluginConf is the configuration the runtime passes the plugin on stdin: its Entry, with the
// network's name and version, and the previous plugin's result.
type PluginConf struct {
	CNIVersion string `json:"cniVersion"`
	Name       string `json:"name"`
	Entry
	// PrevResult is the previous plugin's result, exactly as the runtime wrote it: the plugin
	// prints these bytes unchanged.
	PrevResult json.RawMessage `json:"prevResult,omitempty"`
}

// Settings are a PluginConf's values, defaulted and checked.
type Settings struct {
	AgentSocket string
	Kubeconfig  string
	Timeout     time.Duration
	Ignored     registration.IgnoredNamespaces
}

// ParseConf reads the plugin's configuration from stdin's bytes, naming the field and value of
// anything wrong and the fix.
func ParseConf(stdin []byte) (PluginConf, Settings, error) {
	var conf PluginConf
	if err := json.Unmarshal(stdin, &conf); err != nil {
		return PluginConf{}, Settings{}, fmt.Errorf("%s: the network configuration on stdin does not parse: %w", PluginType, err)
	}
	s, err := conf.Settings()
	return conf, s, err
}

// Settings defaults and checks e's values.
func (e Entry) Settings() (Settings, error) {
	s := Settings{AgentSocket: e.AgentSocket, Kubeconfig: e.Kubeconfig, Timeout: DefaultTimeout}
	if s.AgentSocket == "" {
		s.AgentSocket = DefaultSocket
	}
	if !filepath.IsAbs(s.AgentSocket) {
		return Settings{}, fmt.Errorf("%s: agentSocket %q is not an absolute path; write the agent's --cni-socket, e.g. %q", PluginType, e.AgentSocket, DefaultSocket)
	}
	if s.Kubeconfig != "" && !filepath.IsAbs(s.Kubeconfig) {
		return Settings{}, fmt.Errorf("%s: kubeconfig %q is not an absolute path; write the agent's --cni-kubeconfig, or leave it out", PluginType, e.Kubeconfig)
	}
	if e.Timeout != "" {
		d, err := time.ParseDuration(e.Timeout)
		if err != nil || d <= 0 {
			return Settings{}, fmt.Errorf("%s: timeout %q is not a positive Go duration; write e.g. %q", PluginType, e.Timeout, DefaultTimeout.String())
		}
		s.Timeout = d
	}
	names := e.IgnoredNamespaces
	if names == nil {
		names = registration.DefaultIgnoredNamespaces
	}
	s.Ignored = registration.IgnoredNamespaces{}
	for _, n := range names {
		s.Ignored[n] = true
	}
	return s, nil
}
