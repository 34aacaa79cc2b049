// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Package spiffetest is a test CA that issues SVID-shaped certificates: an X.509 leaf whose one
// URI SAN is a SPIFFE ID (spiffe://<domain>/ns/<ns>/sa/<sa>), for client and server auth, signed
// by a CA whose certificate is the trust bundle. It stands in for SPIRE until the identity issue
// wires it: tests write a workload's SVID, key and bundle where grpc-go's file_watcher certificate
// provider reads them (WriteFiles), and serve TLS as a workload (TLSCertificate).
//
// It is test support: only tests link it.
package spiffetest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/url"
	"os"
	"path/filepath"
	"time"
)

// lifetime is how long an issued certificate is valid: longer than any test.
const lifetime = 24 * time.Hour

// CA issues SVIDs of one trust domain.
type CA struct {
	domain string
	cert   *x509.Certificate
	key    *ecdsa.PrivateKey
	// BundlePEM is the CA's certificate, PEM: the trust bundle.
	BundlePEM []byte
	// DNSNames, when set, are the DNS SANs Issue gives id's SVID beside its SPIFFE ID (none when
	// nil: an SVID as SPIRE issues one without DNS names).
	DNSNames func(id string) []string
}

// NewCA is a fresh CA of trust domain domain (its certificate names spiffe://<domain>).
func NewCA(domain string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	template := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{Organization: []string{"aether test CA"}, CommonName: domain},
		URIs:      []*url.URL{{Scheme: "spiffe", Host: domain}},
		NotBefore: now.Add(-time.Minute), NotAfter: now.Add(lifetime),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, template, template, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{domain: domain, cert: cert, key: key, BundlePEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// Pool is the trust bundle as a pool.
func (ca *CA) Pool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	return pool
}

// Issue is an SVID for id (a spiffe:// URI): the certificate and its key, PEM.
func (ca *CA) Issue(id string) (certPEM, keyPEM []byte, err error) {
	uri, err := url.Parse(id)
	if err != nil || uri.Scheme != "spiffe" || uri.Host == "" {
		return nil, nil, fmt.Errorf("spiffetest: %q is not a SPIFFE ID (spiffe://<trust domain>/<path>)", id)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	template := &x509.Certificate{
		SerialNumber: serial(), URIs: []*url.URL{uri},
		NotBefore: now.Add(-time.Minute), NotAfter: now.Add(lifetime),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	if ca.DNSNames != nil {
		template.DNSNames = ca.DNSNames(id)
	}
	der, err := x509.CreateCertificate(rand.Reader, template, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), nil
}

// TLSCertificate is id's SVID as a tls.Certificate, to serve or dial as id.
func (ca *CA) TLSCertificate(id string) (tls.Certificate, error) {
	certPEM, keyPEM, err := ca.Issue(id)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.X509KeyPair(certPEM, keyPEM)
}

// Files are where WriteFiles wrote a workload's SVID, key and the trust bundle.
type Files struct {
	Certificate, Key, Bundle string
}

// WriteFiles writes id's SVID (svid.pem), its key (svid_key.pem, 0600) and the trust bundle
// (bundle.pem) into dir, as SPIRE's helpers lay them out.
func (ca *CA) WriteFiles(dir, id string) (Files, error) {
	certPEM, keyPEM, err := ca.Issue(id)
	if err != nil {
		return Files{}, err
	}
	f := Files{Certificate: filepath.Join(dir, "svid.pem"), Key: filepath.Join(dir, "svid_key.pem"), Bundle: filepath.Join(dir, "bundle.pem")}
	for path, content := range map[string][]byte{f.Certificate: certPEM, f.Key: keyPEM, f.Bundle: ca.BundlePEM} {
		if err := os.WriteFile(path, content, 0o600); err != nil {
			return Files{}, err
		}
	}
	return f, nil
}

// serial is a random certificate serial number.
func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail
	}
	return n
}
