// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"strings"
	"time"

	"github.com/spiffe/go-spiffe/v2/workloadapi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/aether-mesh/aether-operator/internal/workloadidentity"
)

// maxRetry is the longest pause between two asks of the Workload API while it has no SVID for
// the pod (or does not answer). The pauses grow by a second from 1 s: a pod whose entry is a few
// seconds behind it (SPIRE's agent syncs its entries every 5 s; ~7.5 s from pod creation to SVID
// was measured on a reference cluster) is released within 5 s of the agent having its SVID, and a
// pod held for longer costs its node's agent one workload attestation per 5 s.
const maxRetry = 5 * time.Second

// pollStrategy is the Workload API client's backoff: 1 s, 2 s, ... then maxRetry.
type pollStrategy struct{}

func (pollStrategy) NewBackoff() workloadapi.Backoff { return &pollBackoff{} }

type pollBackoff struct{ n int }

func (b *pollBackoff) Next() time.Duration {
	b.n++
	return min(time.Duration(b.n)*time.Second, maxRetry)
}

func (b *pollBackoff) Reset() { b.n = 0 }

// workloadFlags is the flag set of subcommand name, which reports to logger, with the flag every
// subcommand that talks to SPIRE has: --socket, the Workload API's address.
func workloadFlags(name string, logger *log.Logger) (*flag.FlagSet, *string) {
	flags := flag.NewFlagSet(name, flag.ContinueOnError)
	flags.SetOutput(logger.Writer())
	return flags, flags.String("socket", workloadidentity.WorkloadSocketAddr, "the SPIRE Workload API's address")
}

// newClient is a Workload API client of socket (unix:///path), retrying on pollStrategy.
func newClient(ctx context.Context, socket string) (*workloadapi.Client, error) {
	client, err := workloadapi.New(ctx, workloadapi.WithAddr(socket), workloadapi.WithBackoffStrategy(pollStrategy{}))
	if err != nil {
		return nil, fmt.Errorf("--socket=%q: %w (want the Workload API's unix socket, for example %s)", socket, err, workloadidentity.WorkloadSocketAddr)
	}
	return client, nil
}

// watcher adapts two functions to workloadapi.X509ContextWatcher.
type watcher struct {
	update func(*workloadapi.X509Context)
	fail   func(error)
}

func (w watcher) OnX509ContextUpdate(c *workloadapi.X509Context) { w.update(c) }

// OnX509ContextWatchError passes on every error but the client's own cancellation (the command
// is done).
func (w watcher) OnX509ContextWatchError(err error) {
	if status.Code(err) != codes.Canceled {
		w.fail(err)
	}
}

// pod is the pod this process runs in, from the downward API (workloadidentity.EnvNamespace, ...):
// what its messages name. Empty fields are spelled as placeholders.
type pod struct{ namespace, serviceAccount, node string }

func podFromEnv() pod {
	get := func(name, placeholder string) string {
		if v := os.Getenv(name); v != "" {
			return v
		}
		return placeholder
	}
	return pod{
		namespace:      get(workloadidentity.EnvNamespace, "<namespace>"),
		serviceAccount: get(workloadidentity.EnvServiceAccount, "<service-account>"),
		node:           get(workloadidentity.EnvNodeName, "<node>"),
	}
}

// diagnose says what err, the Workload API's last answer at socket, means for p and where to
// look.
func (p pod) diagnose(socket string, err error) string {
	selectors := fmt.Sprintf("-selector k8s:ns:%s -selector k8s:sa:%s", p.namespace, p.serviceAccount)
	switch {
	case err == nil:
		return "no answer from the Workload API at " + socket + " yet"
	case status.Code(err) == codes.PermissionDenied:
		return fmt.Sprintf("SPIRE's agent answered (%v): no registration entry matches this pod yet. "+
			"The mesh registers one per MeshService: see `kubectl describe meshservice %s -n %s` (status.identity is the SPIFFE ID "+
			"this pod should get, and its events say why it has none), and SPIRE's entries for this pod: `spire-server entry show %s` "+
			"in the spire-server pod. An entry keyed on k8s:container-name does not match this container",
			err, p.serviceAccount, p.namespace, selectors)
	default:
		return fmt.Sprintf("the Workload API at %s does not answer (%v): is SPIRE's agent running on node %s? "+
			"See `kubectl get pods -A -o wide --field-selector spec.nodeName=%s` (a spire-agent pod, Running) and its log",
			socket, oneLine(err), p.node, p.node)
	}
}

// oneLine is err's text on one line.
func oneLine(err error) string { return strings.Join(strings.Fields(err.Error()), " ") }
