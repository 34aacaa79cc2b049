// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Package agent is the node agent's control loop: it registers the node's managed pods as
// MeshEndpoints (the only writer of them), probes their health, marks them Draining when
// deletion starts, and refuses, loudly, a pod whose annotations do not parse.
//
// It must not import internal/controller (the manager's).
package agent
