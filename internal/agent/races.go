// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// race classifies a write's error: an expected race between the agent and another writer (or a
// deletion) is not a failure, and is neither logged as an error nor retried with backoff.
type race int

const (
	// notARace is a real error (or none): the controller logs it and retries with backoff.
	notARace race = iota
	// raceGone means the object, or its namespace, is gone or going away (nothing is left to
	// write, and if the pod still needs an endpoint its deletion brings the pod back to the
	// queue), or the agent itself is stopping (its context is canceled).
	raceGone
	// raceStale means the agent wrote from a stale read: a conflict (another writer, such as the
	// prober or a kubectl user, changed the object first) or an object that exists before the
	// cache shows it. The next read is fresher, so the pod is retried after staleRetry.
	raceStale
)

// staleRetry is how soon a pod whose write lost a race is reconciled again. The watch event of
// the winning write usually brings it back sooner; this retry is the guarantee.
const staleRetry = time.Second

// classify says which race err is, if any. It looks through wrapping.
func classify(err error) race {
	switch {
	case err == nil:
		return notARace
	case apierrors.IsNotFound(err), apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause), errors.Is(err, context.Canceled):
		return raceGone
	case apierrors.IsConflict(err), apierrors.IsAlreadyExists(err):
		return raceStale
	}
	return notARace
}
