// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Package controller holds the manager's reconcilers: MeshService status and the generated
// Service from MeshEndpoints, and route status for GAMMA and L4 routes. Each reconciler gathers
// inputs and writes outputs; what to write is decided by pure translation functions, which ask
// internal/resolve for every default port and dial surface.
//
// It imports api/ and the pure packages (internal/{meshservice,routes,registration,conditions},
// which ask internal/portspec and internal/resolve); it must not import internal/agent,
// internal/xds or internal/capture (those are the node agent's): depguard rule
// controller-not-agent.
package controller
