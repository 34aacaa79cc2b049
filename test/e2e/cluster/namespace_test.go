//go:build e2e

// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package cluster

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// freshNamespace gives a spec the namespace ns as new: one a previous run left behind is deleted
// and waited out first (its pods, endpoints and MeshServices with it), then ns is created with the
// ServiceAccounts named. A managed pod runs as its service's ServiceAccount ("default" is denied
// at admission), so every spec that meshes a pod names one here.
func freshNamespace(ctx context.Context, ns string, serviceAccounts ...string) {
	GinkgoHelper()
	_ = k8s.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	Eventually(func() bool {
		return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{}))
	}, 2*time.Minute, time.Second).Should(BeTrue())
	Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	for _, sa := range serviceAccounts {
		Expect(k8s.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa}})).To(Succeed())
	}
}
