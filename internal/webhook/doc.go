// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Package webhook holds the manager's admission webhooks: the Pod validator that denies a managed
// pod whose annotations internal/portspec refuses, with the parser's own words as the denial.
//
// It must not parse annotations itself: internal/portspec is the one parser.
package webhook
