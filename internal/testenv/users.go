// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package testenv

import (
	"context"
	"fmt"
	"net"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// UserConfig provisions user name, in groups, and returns a rest config that speaks as it: a
// client certificate the API server's client CA signed (UserKubeconfig's), and no token, as a
// person's kubeconfig often is.
func (e *Env) UserConfig(name string, groups ...string) (*rest.Config, error) {
	kubeconfig, err := e.UserKubeconfig(name, groups...)
	if err != nil {
		return nil, err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	if len(cfg.CertData) == 0 && cfg.CertFile == "" {
		return nil, fmt.Errorf("user %s's kubeconfig holds no client certificate", name)
	}
	return cfg, nil
}

// ServiceAccountToken makes ServiceAccount ns/name (unless it exists) and returns a token of it
// (a TokenRequest's, of the API server's audience), as a scraper's mounted token is.
func (e *Env) ServiceAccountToken(ctx context.Context, ns, name string) (string, error) {
	cs, err := kubernetes.NewForConfig(e.Config)
	if err != nil {
		return "", err
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", err
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	return tr.Status.Token, nil
}

// FreeLoopbackAddress is 127.0.0.1:<a port free now>, for a server a test starts (the port is
// released for it; another process could take it meanwhile, which the server's start reports).
func FreeLoopbackAddress(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String()
}
