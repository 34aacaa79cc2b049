// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package spiffetest

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"testing"
)

// TestIssuedSVIDs: an issued certificate carries the SPIFFE ID as its one URI SAN and verifies
// against the bundle for client and server auth; the files hold it, its key and the bundle; one
// from another CA does not verify (the negative control); a non-SPIFFE ID is refused.
func TestIssuedSVIDs(t *testing.T) {
	ca, err := NewCA("aether.internal")
	if err != nil {
		t.Fatal(err)
	}
	const id = "spiffe://aether.internal/ns/shop/sa/payments"
	files, err := ca.WriteFiles(t.TempDir(), id)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.LoadX509KeyPair(files.Certificate, files.Key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if len(leaf.URIs) != 1 || leaf.URIs[0].String() != id {
		t.Errorf("URI SANs %v, want [%s]", leaf.URIs, id)
	}
	bundle, err := os.ReadFile(files.Bundle)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(bundle) {
		t.Fatal("the bundle file holds no certificate")
	}
	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
			t.Errorf("verifying for %v: %v", usage, err)
		}
	}
	other, err := NewCA("aether.internal")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: other.Pool()}); err == nil {
		t.Error("control: another CA's bundle verified the SVID")
	}
	if _, _, err := ca.Issue("https://aether.internal/ns/shop"); err == nil {
		t.Error("a non-SPIFFE ID was issued")
	}
}
