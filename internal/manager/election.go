// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package manager

import (
	"flag"
	"fmt"
	"time"

	"k8s.io/client-go/tools/leaderelection"
	ctrl "sigs.k8s.io/controller-runtime"
)

// LeaseName is the Lease (coordination.k8s.io, in the manager's namespace) the replicas elect
// their leader by.
const LeaseName = "manager.mesh.aether.io"

// The election's defaults, kube-controller-manager's own. A leader that dies without releasing
// the Lease (kill -9, a lost node) is replaced after at most TakeoverBound (about 24 s with these,
// typically LeaseDuration plus a retry period, about 17 s); one that stops gracefully (a rollout,
// a drain, SIGTERM) releases it and is replaced within one jittered retry period. The data plane
// does not wait for either: every agent keeps serving its last xDS and capture rules, and both
// replicas keep answering admission. Only reconciles (new VIPs, status, route status) wait.
const (
	// DefaultLeaseDuration is how long a follower waits, after it last saw the leader renew,
	// before it takes the Lease over: the longest the mesh goes unreconciled after its leader
	// vanishes. It exceeds DefaultRenewDeadline by 5 s, the margin within which a leader that
	// cannot renew has already stopped reconciling before anyone else may start (a paused or
	// slow process must not reconcile beside its successor).
	DefaultLeaseDuration = 15 * time.Second
	// DefaultRenewDeadline is how long the leader keeps retrying a failed renewal before it gives
	// up leading (the process then exits and comes back as a follower): long enough to ride out
	// an API server restart or a slow etcd, which take a few seconds, and shorter than the lease.
	DefaultRenewDeadline = 10 * time.Second
	// DefaultRetryPeriod is how often the leader renews and each follower tries to acquire: one
	// Lease update every 2 s from the leader and one read per follower, a negligible load, and
	// the granularity of a takeover (client-go jitters each follower's wait up to 2.2 periods).
	DefaultRetryPeriod = 2 * time.Second
)

// Election is the manager's leader election: its flags, checked and applied to ctrl.Options.
type Election struct {
	// Enabled elects a leader among the replicas; off, every replica reconciles.
	Enabled bool
	// LeaseDuration, RenewDeadline and RetryPeriod: see their defaults.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

// BindFlags binds the election's flags, kube-controller-manager's names, to fs.
func (e *Election) BindFlags(fs *flag.FlagSet) {
	fs.BoolVar(&e.Enabled, "leader-elect", false,
		"Elect a leader among the replicas (Lease "+LeaseName+" in the manager's namespace), so that only one reconciles; every replica serves the webhooks.")
	fs.DurationVar(&e.LeaseDuration, "leader-elect-lease-duration", DefaultLeaseDuration,
		"How long a follower waits after the leader's last renewal before it takes over: the longest the mesh goes unreconciled after its leader dies without releasing (kill -9, a lost node). Whole seconds; more than --leader-elect-renew-deadline, so that a leader that cannot renew stops reconciling before anyone else starts.")
	fs.DurationVar(&e.RenewDeadline, "leader-elect-renew-deadline", DefaultRenewDeadline,
		"How long the leader retries a failed renewal before it gives up leading and exits: long enough to ride out an API server restart; less than --leader-elect-lease-duration.")
	fs.DurationVar(&e.RetryPeriod, "leader-elect-retry-period", DefaultRetryPeriod,
		"How often the leader renews and followers try to acquire (one Lease write per period from the leader): the granularity of a takeover; --leader-elect-renew-deadline must exceed it 1.2 times (client-go jitters it by that factor).")
}

// Check reports the first setting client-go's election would refuse or misread, naming the
// flag, the value and the fix.
func (e Election) Check() error {
	switch {
	case e.LeaseDuration < time.Second || e.LeaseDuration%time.Second != 0:
		return fmt.Errorf("--leader-elect-lease-duration=%s: give whole seconds, at least 1s (the Lease holds it as leaseDurationSeconds); the default is %s",
			e.LeaseDuration, DefaultLeaseDuration)
	case e.RetryPeriod <= 0:
		return fmt.Errorf("--leader-elect-retry-period=%s: give a positive duration; the default is %s", e.RetryPeriod, DefaultRetryPeriod)
	case e.RenewDeadline >= e.LeaseDuration:
		return fmt.Errorf("--leader-elect-renew-deadline=%s with --leader-elect-lease-duration=%s: the leader must give up before its lease runs out, or two replicas reconcile at once; give a renew deadline below the lease duration (defaults %s and %s)",
			e.RenewDeadline, e.LeaseDuration, DefaultRenewDeadline, DefaultLeaseDuration)
	case float64(e.RenewDeadline) <= leaderelection.JitterFactor*float64(e.RetryPeriod):
		return fmt.Errorf("--leader-elect-renew-deadline=%s with --leader-elect-retry-period=%s: the deadline must exceed %.1f retry periods (client-go's jitter), or the leader gives up before it retries; raise the deadline or shorten the period (defaults %s and %s)",
			e.RenewDeadline, e.RetryPeriod, leaderelection.JitterFactor, DefaultRenewDeadline, DefaultRetryPeriod)
	}
	return nil
}

// Apply sets the election on o. A leader that stops gracefully releases the Lease
// (LeaderElectionReleaseOnCancel), so that its successor need not wait out the lease; it exits
// right after (cmd/manager), as releasing requires.
func (e Election) Apply(o *ctrl.Options) {
	o.LeaderElection = e.Enabled
	o.LeaderElectionID = LeaseName
	o.LeaderElectionReleaseOnCancel = true
	o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = new(e.LeaseDuration), new(e.RenewDeadline), new(e.RetryPeriod)
}

// TakeoverBound is the longest a follower takes to lead after the leader vanished without
// releasing the Lease, by client-go's election: the leader's last renewal was at most then; a
// follower notices it at its next try, up to (1+JitterFactor) retry periods later (each wait is
// jittered up to that); it may take over once it has not seen a renewal for the lease duration,
// and does at its next try, up to (1+JitterFactor) periods later again.
func (e Election) TakeoverBound() time.Duration {
	return e.LeaseDuration + time.Duration(2*(1+leaderelection.JitterFactor)*float64(e.RetryPeriod))
}
