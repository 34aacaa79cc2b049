// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The manager's throughput defaults (cmd/manager's flags). hack/bench measures them: the
// convergence benchmark runs the manager binary with exactly these unless told otherwise, and
// measures the API server's write floor with the same client settings.
const (
	// DefaultMaxConcurrentReconciles is how many reconciles of different objects each controller
	// runs at once (--max-concurrent-reconciles). A reconcile waits on the API server for most of
	// its time (the manager used 4 s of CPU in 40 s at 100x10): with one worker the manager fell
	// 12 s behind the agents at 100x10; with eight it converged within the batching window of
	// their last write (hack/bench).
	DefaultMaxConcurrentReconciles = 8
	// DefaultKubeAPIQPS is the client's sustained request rate (--kube-api-qps); negative turns the
	// client-side limiter off and leaves fairness to the API server's API Priority and Fairness.
	DefaultKubeAPIQPS = -1
	// DefaultKubeAPIBurst is the client's burst above DefaultKubeAPIQPS (--kube-api-burst).
	DefaultKubeAPIBurst = 0
	// DefaultBatchWindow is how long a service's inputs must be quiet before it is reconciled (at
	// most five windows after the first change), merging a burst of changes into one reconcile
	// and one write (--batch-window). It is the agent's probe interval: an endpoint is not
	// routable before its first probe anyway, so a new endpoint's Verified comes at most one
	// probe interval later than it would without the window.
	DefaultBatchWindow = 2 * time.Second
)

// ClientOptions are the manager's client options. Its reads from the cache wait until the cache
// has seen the manager's own earlier writes (controller-runtime's read-your-writes consistency):
// a reconcile that follows the controller's own write of a MeshService's status, a generated
// Service or an endpoint's Verified condition reads that write, instead of the object before it.
// Without it, the next reconcile read the older object from the cache, and the write it then
// made lost to the first (a Conflict, or AlreadyExists for a Service it had just created), to be
// retried after a second: at 100x10 with eight workers, one manager write in six was such a
// retry (hack/bench). A List waits for the manager's latest write of any object of its kind, so
// the reconcile reads a service's endpoints by key instead (serviceEndpoints), waiting only for
// its own writes of them.
//
// Every write carries FieldManager, status writes too (without it, the API server names an update's
// manager after the client's user agent, the binary's name): managedFields then tell the
// controller's writes apart from anyone else's, which test/invariant checks.
func ClientOptions() client.Options {
	return client.Options{Cache: &client.CacheOptions{EnableReadYourWritesConsistency: new(true)}, FieldOwner: FieldManager}
}
