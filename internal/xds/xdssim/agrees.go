// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdssim

import (
	"errors"
	"fmt"

	"github.com/aether-mesh/aether-operator/internal/resolve"
	"github.com/aether-mesh/aether-operator/internal/xds"
)

// Agrees says whether a connection's outcome on the source side is what resolve promised for
// the service named fqdn: nil when it is, else what differs.
//
//   - Reaches (port p, protocol P): forwarded, by the HCM when P is HTTP-class (or the row is an
//     HTTP request) and by tcp_proxy otherwise, every chosen target's membership being
//     xds.LoadAssignment(fqdn, p).
//   - Misdirected, BadRequest and NotMesh (the proxy port's 404): answered with the status,
//     x-aether-error and body of want.
//   - Refused: passed through to the original destination (which kube-proxy refuses: the
//     generated Service does not expose an undeclared port), or closed because no chain matches
//     or the chosen cluster has no endpoint (the blackhole). Closed for a broken configuration (a
//     rejected listener, a missing cluster, load assignment or route configuration) is not the
//     refusal resolve means.
//   - HostDecides is no single outcome: check the Host rows.
//
// want is a row written for one name (resolve.Dial.For), so its body names that name; fqdn is
// the service's mesh name (xds.FQDN), whichever name the row spells.
func Agrees(out Outcome, want resolve.Result, fqdn string) error {
	switch want.Outcome {
	case resolve.Reaches:
		return reaches(out, want, fqdn)
	case resolve.Misdirected, resolve.BadRequest, resolve.NotMesh:
		return answers(out, want)
	case resolve.Refused:
		return refused(out)
	}
	return fmt.Errorf("resolve's outcome %s is no single data-plane outcome: check its Host rows", want.Outcome)
}

func refused(out Outcome) error {
	switch {
	case out.Verdict == Passthrough && out.Err == nil:
		return nil
	case out.Verdict == Closed && (errors.Is(out.Err, ErrNoChain) || errors.Is(out.Err, ErrNoHealthyUpstream)) &&
		!errors.Is(out.Err, ErrNoCluster) && !errors.Is(out.Err, ErrNoLoadAssignment):
		return nil
	}
	return fmt.Errorf("resolve says refused; the data plane gives %s", out)
}

func reaches(out Outcome, want resolve.Result, fqdn string) error {
	if out.Verdict != Forwarded || out.Err != nil {
		return fmt.Errorf("resolve says port %d (%s); the data plane gives %s", want.Port, want.Protocol, out)
	}
	protocol := TCP
	if want.Protocol.IsHTTP() {
		protocol = HTTP
	}
	if out.Protocol != protocol {
		return fmt.Errorf("resolve says port %d as %s; the data plane carries it as %s: %s", want.Port, want.Protocol, out.Protocol, out)
	}
	membership := xds.LoadAssignment(fqdn, want.Port)
	for _, t := range out.Targets {
		if t.Weight > 0 && t.LoadAssignment != membership {
			return fmt.Errorf("resolve says %s; the data plane sends to cluster %q with membership %q: %s", membership, t.Cluster, t.LoadAssignment, out)
		}
	}
	return nil
}

func answers(out Outcome, want resolve.Result) error {
	r := out.Response
	switch {
	case out.Verdict != Answered || r == nil || r.Local:
		return fmt.Errorf("resolve says %d %s; the data plane gives %s", resolve.HTTPStatus(want.Outcome), want.Error, out)
	case r.Status != resolve.HTTPStatus(want.Outcome):
		return fmt.Errorf("resolve says status %d; the data plane answers %d: %s", resolve.HTTPStatus(want.Outcome), r.Status, out)
	case r.Header(resolve.ErrorHeader) != string(want.Error):
		return fmt.Errorf("resolve says %s: %s; the data plane answers %q: %s", resolve.ErrorHeader, want.Error, r.Header(resolve.ErrorHeader), out)
	case r.Body != want.Body:
		return fmt.Errorf("resolve's body is %q; the data plane answers %q", want.Body, r.Body)
	}
	return nil
}
