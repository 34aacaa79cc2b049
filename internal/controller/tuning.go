// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

// The manager's throughput defaults (cmd/manager's flags). hack/bench measures them: the
// convergence benchmark runs the manager binary with exactly these unless told otherwise, and
// measures the API server's write floor with the same client settings.
const (
	// DefaultMaxConcurrentReconciles is how many reconciles of different objects each controller
	// runs at once (--max-concurrent-reconciles).
	DefaultMaxConcurrentReconciles = 1
	// DefaultKubeAPIQPS is the client's sustained request rate (--kube-api-qps); negative turns the
	// client-side limiter off and leaves fairness to the API server's API Priority and Fairness.
	DefaultKubeAPIQPS = -1
	// DefaultKubeAPIBurst is the client's burst above DefaultKubeAPIQPS (--kube-api-burst).
	DefaultKubeAPIBurst = 0
)
