// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"flag"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/aether-mesh/aether-operator/internal/spireregistrar"
)

// spireFlags configure the SPIRE registrar (internal/spireregistrar).
type spireFlags struct {
	// socket is the SPIRE server API's unix socket; empty turns the registrar off.
	socket string
	// nodeSelectors select the node agents' alias entry; empty leaves the alias to the user's SPIRE.
	nodeSelectors string
	// registrarOnly runs the registrar alone: the sidecar of the SPIRE server.
	registrarOnly bool
	// resync is the period of the full diff when nothing changes.
	resync time.Duration
	// delegateNamespace and delegateServiceAccount are the node agent's ServiceAccount.
	delegateNamespace, delegateServiceAccount string
	// nodeAgentPath is the path of a node's SPIRE agent ID, the parent of its pods' identities.
	nodeAgentPath string
}

func (f *spireFlags) bindFlags(fs *flag.FlagSet) {
	fs.StringVar(&f.socket, "spire-server-socket", "",
		"Path of the SPIRE server API's unix socket. When set, the manager keeps SPIRE's registration entries equal to the MeshServices' identities (it touches only entries it created); empty turns the registrar off.")
	fs.StringVar(&f.nodeSelectors, "spire-node-selectors", spireregistrar.DefaultNodeSelectors,
		"Comma-separated type:value selectors of the node agents' alias entry ("+spireregistrar.DefaultNodeSelectors+": agents attested by k8s_psat in cluster aether). Empty: the registrar does not manage the alias (your SPIRE has one for the ID spiffe://<mesh-domain>/aether/node-agents).")
	fs.BoolVar(&f.registrarOnly, "spire-registrar-only", false,
		"Run only the SPIRE registrar (no webhooks, no other controllers), as a sidecar of the SPIRE server sharing its socket; with --leader-elect it elects on its own lease, "+spireregistrar.LeaderElectionID+".")
	fs.DurationVar(&f.resync, "spire-resync", spireregistrar.DefaultResync,
		"How often the registrar compares all its entries with SPIRE's when nothing changed, repairing entries changed or deleted behind its back.")
	fs.StringVar(&f.delegateNamespace, "spire-delegate-namespace", "",
		"Namespace of the node agent, whose ServiceAccount's SPIFFE ID the SPIRE agents authorize as a delegate; empty: the namespace this process runs in (POD_NAMESPACE, from the downward API).")
	fs.StringVar(&f.delegateServiceAccount, "spire-delegate-service-account", spireregistrar.DefaultDelegateServiceAccount,
		"ServiceAccount of the node agent, whose SPIFFE ID the SPIRE agents authorize as a delegate.")
	fs.StringVar(&f.nodeAgentPath, "spire-node-agent-path", spireregistrar.DefaultNodeAgentPath,
		"Path of a node's SPIRE agent ID, "+spireregistrar.NodeUIDPlaceholder+" and "+spireregistrar.NodeNamePlaceholder+" standing for the node's. Each identity's entry is parented to the agents of the nodes that run its pods, and to no other: the default is the ID SPIRE's k8s_psat attestor gives the agent of a node in cluster aether.")
}

// config checks the flags and returns the registrar's configuration, or nil when the registrar is
// off. podNamespace is POD_NAMESPACE.
func (f *spireFlags) config(meshDomain, podNamespace string) (*spireregistrar.Config, error) {
	if f.socket == "" {
		if f.registrarOnly {
			return nil, fmt.Errorf("--spire-registrar-only needs --spire-server-socket: give the path of the SPIRE server API's socket, for example /run/spire/server-sockets/api.sock")
		}
		return nil, nil
	}
	if !filepath.IsAbs(f.socket) {
		return nil, fmt.Errorf("--spire-server-socket=%q: give the absolute path of the SPIRE server API's unix socket (its socket_path), for example /run/spire/server-sockets/api.sock", f.socket)
	}
	if f.resync < time.Second {
		return nil, fmt.Errorf("--spire-resync=%s: give a period of at least 1s; the default is %s", f.resync, spireregistrar.DefaultResync)
	}
	selectors, err := spireregistrar.ParseSelectors(f.nodeSelectors)
	if err != nil {
		return nil, fmt.Errorf("--spire-node-selectors=%q: %w", f.nodeSelectors, err)
	}
	namespace := f.delegateNamespace
	if namespace == "" {
		namespace = podNamespace
	}
	if namespace == "" {
		return nil, fmt.Errorf("--spire-delegate-namespace is empty and POD_NAMESPACE (downward API) is not set: give the node agent's namespace, for example --spire-delegate-namespace=aether-operator-system")
	}
	if errs := validation.IsDNS1123Label(namespace); len(errs) > 0 {
		return nil, fmt.Errorf("--spire-delegate-namespace=%q is not a namespace name (%s)", namespace, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Subdomain(f.delegateServiceAccount); len(errs) > 0 {
		return nil, fmt.Errorf("--spire-delegate-service-account=%q is not a ServiceAccount name (%s); the default is %s",
			f.delegateServiceAccount, strings.Join(errs, "; "), spireregistrar.DefaultDelegateServiceAccount)
	}
	agentPath, err := spireregistrar.ParseNodeAgentPath(f.nodeAgentPath)
	if err != nil {
		return nil, fmt.Errorf("--spire-node-agent-path=%q: %w", f.nodeAgentPath, err)
	}
	td, err := spiffeid.TrustDomainFromString(meshDomain)
	if err != nil {
		return nil, fmt.Errorf("--mesh-domain=%q is not a SPIFFE trust domain: %w", meshDomain, err)
	}
	return &spireregistrar.Config{TrustDomain: td, NodeSelectors: selectors,
		DelegateNamespace: namespace, DelegateServiceAccount: f.delegateServiceAccount, NodeAgentPath: agentPath}, nil
}
