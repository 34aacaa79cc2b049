//go:build e2e

// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Package cluster is the end-to-end tier on a real single-node cluster (make cluster-up, the
// operator deployed from config/default, the node's Envoy included (its image make images'), and
// SPIRE from config/spire, by hack/cluster/deploy.sh). It must run inside the node's network namespace (make test-cluster
// does), so that every request it sends — to the API server, to pods — stays inside that
// namespace.
package cluster

import (
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aether-mesh/aether-operator/internal/testenv"
)

var k8s client.Client

func TestCluster(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "cluster tier")
}

var _ = BeforeSuite(func() {
	state := os.Getenv("AETHER_CLUSTER_DIR")
	if state == "" {
		state = "/tmp/aether-cluster"
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(state, "pki", "admin.kubeconfig"))
	Expect(err).NotTo(HaveOccurred(), "no cluster: run make cluster-up first")
	k8s, err = client.New(cfg, client.Options{Scheme: testenv.NewScheme()})
	Expect(err).NotTo(HaveOccurred())
})
