// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xds

import "flag"

// Update rewrites the package's golden files (internal/golden) instead of comparing with them:
// the bootstrap's (this package's tests) and the scenarios' resources (package xds_test, which
// reads it as xds.Update: one flag for the one test binary).
var Update = flag.Bool("update", false, "rewrite the golden files under testdata/ and delete orphaned ones")
