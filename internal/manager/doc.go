// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Package manager wires one replica of the manager binary (cmd/manager): the controllers, the
// admission webhooks and the probes it runs (Setup, Options) and the leader election among its
// replicas (Election). The binary and the HA test (ha_test.go) build their managers here, so the
// test runs two replicas wired exactly as the binary wires one.
//
// What runs where, with leader election on (config/manager runs two replicas):
//   - only the leader: the MeshService controller and the four route controllers, the only
//     runnables that write (MeshServices, generated Services, MeshEndpoints' Verified condition,
//     route status, their Events). Controllers need leader election by default; nothing here
//     turns that off.
//   - every replica: the webhook server (controller-runtime starts webhook servers before, and
//     regardless of, the election: admission answers, it writes nothing), the health probes and
//     metrics (and pprof when on), the informer caches, and each controller's event sources
//     (config.Controller.EnableWarmup): a follower's caches are warm and its queues full when it
//     takes over, so it reconciles at once instead of listing every kind first. Sources only
//     read and enqueue.
//
// It imports internal/controller and internal/webhook (what a replica runs); nothing imports it
// but cmd/manager and tests.
package manager
