// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package testapp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"
	"github.com/spiffe/go-spiffe/v2/workloadapi"
)

// SVIDPrefix starts the line the test server prints for an SVID it fetched: "svid <SPIFFE ID>".
const SVIDPrefix = "svid"

// FetchSVID asks the SPIRE agent's Workload API on the unix socket at socket (a path) for this
// process's X.509 SVID and returns its SPIFFE ID, the URI SAN of a certificate that chains to the
// trust bundle the agent serves with it. Until ctx ends it asks again every retry, writing each
// failure to log: an agent answers "no identity issued" until it has synced a matching entry
// (every 5 s), and a socket may not be there yet.
func FetchSVID(ctx context.Context, socket string, retry time.Duration, log io.Writer) (spiffeid.ID, error) {
	for {
		id, err := fetchVerified(ctx, socket)
		if err == nil {
			return id, nil
		}
		_, _ = fmt.Fprintf(log, "error %v\n", err)
		select {
		case <-ctx.Done():
			return spiffeid.ID{}, fmt.Errorf("no SVID from the Workload API at %s: %w", socket, err)
		case <-time.After(retry):
		}
	}
}

// fetchVerified makes one attempt: the default SVID, verified against the bundles served with it.
func fetchVerified(ctx context.Context, socket string) (spiffeid.ID, error) {
	attempt, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	x509, err := workloadapi.FetchX509Context(attempt, workloadapi.WithAddr("unix://"+socket))
	if err != nil {
		return spiffeid.ID{}, err
	}
	svid := x509.DefaultSVID()
	if svid == nil {
		return spiffeid.ID{}, errors.New("the Workload API answered no SVID")
	}
	id, _, err := x509svid.Verify(svid.Certificates, x509.Bundles)
	if err != nil {
		return spiffeid.ID{}, fmt.Errorf("SVID %s does not chain to its trust bundle: %w", svid.ID, err)
	}
	return id, nil
}
