// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/spiffe/go-spiffe/v2/bundle/x509bundle"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"

	"github.com/aether-mesh/aether-operator/internal/proxyless"
)

// probeCommand is `aether-identity probe`: exit 0 when dir's files make a usable identity.
func probeCommand(args []string, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("probe", flag.ContinueOnError)
	flags.SetOutput(stderr)
	dir := flags.String("dir", proxyless.IdentityDir, "the directory of the certificate files")
	if err := flags.Parse(args); err != nil {
		return exitUsage
	}
	id, notAfter, err := checkFiles(*dir, time.Now())
	if err != nil {
		fmt.Fprintf(stderr, "aether-identity probe: %v\n", err)
		return exitFailed
	}
	fmt.Fprintf(stdout, "%s, valid until %s\n", id, notAfter.UTC().Format(time.RFC3339))
	return exitOK
}

// checkFiles reads dir's certificate, key and bundle and checks what a TLS client needs of them
// at now: the certificate is an X.509 SVID, the key is its key, and it chains to the bundle of
// its trust domain. It returns the SVID's ID and expiry, or an error naming the file and what is
// wrong.
func checkFiles(dir string, now time.Time) (spiffeid.ID, time.Time, error) {
	certPath, keyPath, bundlePath := filepath.Join(dir, certificateName), filepath.Join(dir, keyName), filepath.Join(dir, bundleName)
	svid, err := x509svid.Load(certPath, keyPath)
	if err != nil {
		return spiffeid.ID{}, time.Time{}, fmt.Errorf("%s and %s are not an X.509 SVID and its key: %w", certPath, keyPath, err)
	}
	bundle, err := x509bundle.Load(svid.ID.TrustDomain(), bundlePath)
	if err != nil {
		return spiffeid.ID{}, time.Time{}, fmt.Errorf("%s is not a bundle of X.509 roots: %w", bundlePath, err)
	}
	if _, _, err := x509svid.Verify(svid.Certificates, bundle, x509svid.WithTime(now)); err != nil {
		return spiffeid.ID{}, time.Time{}, fmt.Errorf("%s (%s) does not chain to %s at %s: %w",
			certPath, svid.ID, bundlePath, now.UTC().Format(time.RFC3339), err)
	}
	return svid.ID, svid.Certificates[0].NotAfter, nil
}
