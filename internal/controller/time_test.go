// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import "time"

func timeAfterSecond() <-chan time.Time { return time.After(1100 * time.Millisecond) }
