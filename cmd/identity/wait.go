// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"sync"
	"time"

	"github.com/spiffe/go-spiffe/v2/svid/x509svid"
	"github.com/spiffe/go-spiffe/v2/workloadapi"
)

// DefaultTimeout bounds the gate's wait: after it, wait fails closed. Five minutes is far more
// than SPIRE takes for a pod whose entry exists (seconds: its agent syncs every 5 s), and room
// for a node's spire-agent to start or restart; it is half of a Deployment's default
// progressDeadlineSeconds (600 s), so a pod that cannot get its identity shows as
// Init:Error (then Init:CrashLoopBackOff, each run of the gate logging why) before its rollout
// is declared stuck. The kubelet runs the gate again after a failure (pod restartPolicy Always
// or OnFailure): the bound is one attempt's, not the pod's.
const DefaultTimeout = 5 * time.Minute

// LogInterval is how often wait says that it is still waiting, and why.
const LogInterval = 10 * time.Second

// waitCommand is `aether-identity wait`.
func waitCommand(ctx context.Context, args []string, logger *log.Logger) int {
	flags, socket := workloadFlags("wait", logger)
	timeout := flags.Duration("timeout", DefaultTimeout, "how long to wait for the SVID before failing closed")
	if err := flags.Parse(args); err != nil {
		return exitUsage
	}
	if *timeout <= 0 {
		logger.Printf("--timeout=%v: want a positive duration, for example %v", *timeout, DefaultTimeout)
		return exitUsage
	}
	client, err := newClient(ctx, *socket)
	if err != nil {
		logger.Print(err)
		return exitUsage
	}
	defer client.Close()
	if err := waitForSVID(ctx, client, *socket, *timeout, podFromEnv(), logger); err != nil {
		logger.Print(err)
		return exitFailed
	}
	return exitOK
}

// waitForSVID asks the Workload API for this process's X.509 SVID until it gets one (nil) or
// timeout passes (an error saying why, for the pod's log and its termination message). Every
// LogInterval it logs how long it has waited and what the last answer means.
func waitForSVID(ctx context.Context, client *workloadapi.Client, socket string, timeout time.Duration, p pod, logger *log.Logger) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	got := make(chan *x509svid.SVID, 1)
	var mu sync.Mutex
	var last error
	go func() {
		_ = client.WatchX509Context(ctx, watcher{
			update: func(c *workloadapi.X509Context) {
				select {
				case got <- c.DefaultSVID():
				default:
				}
			},
			fail: func(err error) { mu.Lock(); last = err; mu.Unlock() },
		})
	}()
	lastAnswer := func() error { mu.Lock(); defer mu.Unlock(); return last }

	start := time.Now()
	logger.Printf("waiting for this pod's X.509 SVID from the SPIRE Workload API at %s (failing closed after %v)", socket, timeout)
	tick := time.NewTicker(LogInterval)
	defer tick.Stop()
	for {
		select {
		case svid := <-got:
			logger.Printf("got %s (valid until %s) after %v: the pod's containers may start",
				svid.ID, svid.Certificates[0].NotAfter.UTC().Format(time.RFC3339), since(start))
			return nil
		case <-tick.C:
			logger.Printf("still no X.509 SVID after %v (failing closed in %v): %s",
				since(start), (timeout - time.Since(start)).Round(time.Second), p.diagnose(socket, lastAnswer()))
		case <-ctx.Done():
			if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("stopped after %v without an X.509 SVID", since(start))
			}
			return fmt.Errorf("no X.509 SVID for this pod within --timeout=%v: failing closed, since a pod without its identity "+
				"cannot talk to the mesh (the kubelet runs this container again). Last: %s", timeout, p.diagnose(socket, lastAnswer()))
		}
	}
}

// since is the time since start, in whole seconds.
func since(start time.Time) time.Duration { return time.Since(start).Round(time.Second) }
