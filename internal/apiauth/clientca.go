// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package apiauth

import (
	"context"
	"crypto/x509"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// Where the API server publishes the CA it verifies client certificates with, for servers that
// delegate authentication to it (aggregated API servers read the same): key client-ca-file of
// this ConfigMap, which it keeps current itself.
const (
	ClientCANamespace = "kube-system"
	ClientCAConfigMap = "extension-apiserver-authentication"
	ClientCAKey       = "client-ca-file"
)

// ClientCARefresh is how long the client CA read is used before it is read again (a CA the
// cluster rotates is trusted within this time).
const ClientCARefresh = time.Minute

// ClientCA is the cluster's client CA (ClientCAConfigMap), read when a request needs it and at
// most once per ClientCARefresh; a failed read keeps the last good one. Until one read succeeds
// no certificate is accepted, and bearer tokens still are.
type ClientCA struct {
	configMaps corev1client.ConfigMapsGetter
	now        func() time.Time

	mu     sync.Mutex
	pem    []byte
	opts   x509.VerifyOptions
	ok     bool
	readAt time.Time
}

var _ dynamiccertificates.CAContentProvider = &ClientCA{}

// NewClientCA reads the CA through configMaps.
func NewClientCA(configMaps corev1client.ConfigMapsGetter) *ClientCA {
	return &ClientCA{configMaps: configMaps, now: time.Now}
}

// Name names the CA, for the authenticator's logs.
func (c *ClientCA) Name() string {
	return ClientCANamespace + "/" + ClientCAConfigMap + "/" + ClientCAKey
}

// CurrentCABundleContent is the CA as last read, PEM.
func (c *ClientCA) CurrentCABundleContent() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pem
}

// VerifyOptions are the options a client certificate is verified with: the cluster's client CA
// as roots, for client authentication; false while none could be read.
func (c *ClientCA) VerifyOptions() (x509.VerifyOptions, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if now := c.now(); c.readAt.IsZero() || now.Sub(c.readAt) >= ClientCARefresh {
		c.readAt = now
		c.read()
	}
	return c.opts, c.ok
}

// read reads the ConfigMap; c.mu is held.
func (c *ClientCA) read() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cm, err := c.configMaps.ConfigMaps(ClientCANamespace).Get(ctx, ClientCAConfigMap, metav1.GetOptions{})
	if err != nil {
		return
	}
	pem := []byte(cm.Data[ClientCAKey])
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return
	}
	c.pem, c.ok = pem, true
	c.opts = x509.VerifyOptions{Roots: pool, Intermediates: x509.NewCertPool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
}

// AddListener does nothing: the authenticator asks VerifyOptions on every request.
func (c *ClientCA) AddListener(dynamiccertificates.Listener) {}
