// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package v1alpha1_test

import (
	"testing"

	"github.com/aether-mesh/aether-operator/internal/testenv"
)

// env is this package's real kube-apiserver and etcd, with the CRDs installed from config/.
var env *testenv.Env

func TestMain(m *testing.M) { testenv.Run(m, &env) }
