// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xds

import "flag"

// update rewrites the package's golden files (internal/golden) instead of comparing with them.
var update = flag.Bool("update", false, "rewrite the golden files under testdata/ and delete orphaned ones")
