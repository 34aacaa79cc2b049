// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"cmp"
	"flag"
	"slices"
	"strings"
	"testing"

	"github.com/aether-mesh/aether-operator/internal/spireregistrar"
	"github.com/aether-mesh/aether-operator/internal/workloadidentity"
)

// TestSpireFlags parses the registrar's flags as the manager does: off by default; on with a
// socket, with the defaults (the alias selected by k8s_psat:cluster:aether, the delegate in
// POD_NAMESPACE); each impossible value refused naming the flag, the value and the fix.
func TestSpireFlags(t *testing.T) {
	cases := map[string]struct {
		args         []string
		podNamespace string
		off          bool
		selectors    []workloadidentity.Selector
		delegate     string // namespace/serviceaccount
		agentPath    string // default: spireregistrar.DefaultNodeAgentPath
		err          string
	}{
		"off by default": {off: true},
		"on, defaults": {args: []string{"--spire-server-socket=/run/spire/server-sockets/api.sock"}, podNamespace: "aether-operator-system",
			selectors: []workloadidentity.Selector{{Type: "k8s_psat", Value: "cluster:aether"}}, delegate: "aether-operator-system/" + spireregistrar.DefaultDelegateServiceAccount},
		"registrar only, the alias left to the user's SPIRE, the delegate named": {
			args: []string{"--spire-server-socket=/run/spire/api.sock", "--spire-registrar-only", "--spire-node-selectors=",
				"--spire-delegate-namespace=mesh", "--spire-delegate-service-account=node-agent"},
			podNamespace: "spire", delegate: "mesh/node-agent",
		},
		"registrar only without a socket": {args: []string{"--spire-registrar-only"}, err: "--spire-registrar-only needs --spire-server-socket"},
		"relative socket":                 {args: []string{"--spire-server-socket=api.sock"}, podNamespace: "x", err: `--spire-server-socket="api.sock": give the absolute path`},
		"bad selector": {args: []string{"--spire-server-socket=/s", "--spire-node-selectors=k8s_psat"}, podNamespace: "x",
			err: `--spire-node-selectors="k8s_psat": selector "k8s_psat" is not type:value`},
		"no namespace anywhere": {args: []string{"--spire-server-socket=/s"}, err: "--spire-delegate-namespace is empty and POD_NAMESPACE"},
		"bad service account": {args: []string{"--spire-server-socket=/s", "--spire-delegate-service-account=Agent_1"}, podNamespace: "x",
			err: `--spire-delegate-service-account="Agent_1" is not a ServiceAccount name`},
		"node agents by name": {args: []string{"--spire-server-socket=/s", "--spire-node-agent-path=/spire/agent/x509pop/{node-name}"}, podNamespace: "x",
			selectors: []workloadidentity.Selector{{Type: "k8s_psat", Value: "cluster:aether"}}, delegate: "x/" + spireregistrar.DefaultDelegateServiceAccount,
			agentPath: "/spire/agent/x509pop/{node-name}"},
		"node agent path naming no node": {args: []string{"--spire-server-socket=/s", "--spire-node-agent-path=/spire/agent/k8s_psat/aether"}, podNamespace: "x",
			err: `--spire-node-agent-path="/spire/agent/k8s_psat/aether": "/spire/agent/k8s_psat/aether" names no node: put {node-uid} or {node-name}`},
		"node agent path outside SPIRE's agents": {args: []string{"--spire-server-socket=/s", "--spire-node-agent-path=/nodes/{node-uid}"}, podNamespace: "x",
			err: `--spire-node-agent-path="/nodes/{node-uid}": "/nodes/{node-uid}" is not under /spire/agent/`},
		"node agent path not a path": {args: []string{"--spire-server-socket=/s", "--spire-node-agent-path=/spire/agent//{node-uid}"}, podNamespace: "x",
			err: `is not a SPIFFE ID path once a node is put in`},
		"resync too short": {args: []string{"--spire-server-socket=/s", "--spire-resync=10ms"}, podNamespace: "x", err: "--spire-resync=10ms: give a period of at least 1s"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			fs := flag.NewFlagSet("manager", flag.ContinueOnError)
			var f spireFlags
			f.bindFlags(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			cfg, err := f.config("aether.internal", tc.podNamespace)
			switch {
			case tc.err != "":
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
			case err != nil:
				t.Fatalf("refused: %v", err)
			case tc.off != (cfg == nil):
				t.Fatalf("registrar configuration %+v, want off=%v", cfg, tc.off)
			case cfg != nil:
				if !slices.Equal(cfg.NodeSelectors, tc.selectors) || cfg.DelegateNamespace+"/"+cfg.DelegateServiceAccount != tc.delegate ||
					cfg.TrustDomain.Name() != "aether.internal" || cfg.NodeAgentPath != cmp.Or(tc.agentPath, spireregistrar.DefaultNodeAgentPath) {
					t.Errorf("configuration %+v, want selectors %v, delegate %s, node agent path %q", cfg, tc.selectors, tc.delegate, tc.agentPath)
				}
			}
		})
	}
}
