// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package envoy_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aether-mesh/aether-operator/hack/testapp"
	"github.com/aether-mesh/aether-operator/internal/capture/apply/nstest"
	"github.com/aether-mesh/aether-operator/internal/xds"
	"github.com/aether-mesh/aether-operator/internal/xds/xdstest"
)

// The HTTP/3 hop live (xdstest.HTTP3Hop, the agent's --hop-http3): frontend-0 calls payments'
// HTTP 8080 through its capture, as any meshed pod does; the node's Envoy tries HTTP/3 to the
// payments pod's inbound QUIC listener (UDP 18008 in its namespace) and falls back to HTTP/2 over
// TLS on TCP 18008.
var (
	// h3Downstream counts the requests payments' inbound HTTP/3 chain of 8080 served.
	h3Downstream = regexp.MustCompile(`^http\.in_h3_8080\.downstream_rq_total$`)
	// paymentsHTTP is frontend's cluster of payments' 8080, by the stat it ends a name with.
	paymentsHTTP = func(stat string) *regexp.Regexp {
		return regexp.MustCompile(`^cluster\.payments\.shop\.aether\.internal.8080.web/frontend\.` + stat + `$`)
	}
)

// TestHTTP3HopLive: with SVIDs that carry the hop's DNS SANs and UDP 18008 open, the request
// crosses the hop over QUIC (the caller's cluster opens an HTTP/3 connection, the destination's
// inbound HTTP/3 chain takes it) and the application reads the caller's identity, as over HTTP/2;
// with UDP 18008 dropped in the destination pods' namespaces, the same request succeeds over
// HTTP/2, HTTP/3 is marked broken and no QUIC connection reaches an inbound; with SVIDs as SPIRE
// issues them here (a SPIFFE ID, no DNS SAN), the caller refuses the QUIC handshake (the
// certificate names no hop SNI) and the request succeeds over HTTP/2 all the same.
func TestHTTP3HopLive(t *testing.T) {
	for _, tc := range []struct {
		name     string
		udpOpen  bool
		hopNames bool
		h3       bool
	}{
		{"hop DNS SANs, UDP 18008 open: HTTP/3", true, true, true},
		{"hop DNS SANs, UDP 18008 dropped: HTTP/2", false, true, false},
		{"SPIFFE ID only, UDP 18008 open: HTTP/2", true, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := xdstest.Scenarios()["http3-hop"]
			opts := meshOptions{}
			if tc.hopNames {
				opts.svidDNS = hopDNSNames
			}
			lm := startMeshWith(t, s, opts)
			verdict := "counter"
			if !tc.udpOpen {
				verdict = "counter drop"
			}
			for _, w := range s.Workloads {
				if w.Service == "payments" {
					nft(t, lm.fabric.pods[xds.PodKey(w.Namespace, w.Name)], "table inet h3probe {\n chain input {\n"+
						"  type filter hook input priority -10; policy accept;\n  udp dport 18008 "+verdict+"\n }\n}\n")
				}
			}
			here := lm.nodes[xdstest.ThisNode].envoy
			downstreamH3 := func() uint64 {
				var n uint64
				for _, node := range lm.nodes {
					n += statSum(t, node.envoy, h3Downstream)
				}
				return n
			}
			frontend := lm.fabric.pods[xds.PodKey("web", "frontend-0")]

			got := whoami(t, frontend)
			if want := "URI=" + xdstest.Identity("web", "frontend"); !strings.Contains(got, want) {
				t.Errorf("the application read %q, want the caller's identity (%s)", got, want)
			}
			if tc.h3 {
				waitStat(t, "the caller's HTTP/3 connections", func() uint64 { return statSum(t, here, paymentsHTTP("upstream_cx_http3_total")) })
				waitStat(t, "the inbound's HTTP/3 requests", downstreamH3)
				if n := statSum(t, here, paymentsHTTP("upstream_http3_broken")); n != 0 {
					t.Errorf("HTTP/3 marked broken %d times with UDP 18008 open", n)
				}
				return
			}
			waitStat(t, "the caller's HTTP/2 connections", func() uint64 { return statSum(t, here, paymentsHTTP("upstream_cx_http2_total")) })
			waitStat(t, "HTTP/3 marked broken", func() uint64 { return statSum(t, here, paymentsHTTP("upstream_http3_broken")) })
			if n := downstreamH3(); n != 0 {
				t.Errorf("an inbound served %d requests over HTTP/3", n)
			}
			// The next request goes straight to HTTP/2, and succeeds too.
			whoami(t, frontend)
		})
	}
}

// hopDNSNames are the DNS SANs an SVID needs for the HTTP/3 hop (xds.HopServerName): for
// spiffe://<domain>/ns/<ns>/sa/<sa>, the service's mesh name and every name one label below it.
func hopDNSNames(id string) []string {
	domain, path, _ := strings.Cut(strings.TrimPrefix(id, "spiffe://"), "/")
	ns, sa, _ := strings.Cut(strings.TrimPrefix(path, "ns/"), "/sa/")
	fqdn := xds.FQDN(sa, ns, domain)
	return []string{fqdn, "*." + fqdn}
}

// whoami sends GET /testapp/whoami to payments' 8080 from ns, through its capture, and returns
// the answer; anything but a 200 fails the test.
func whoami(t testing.TB, ns *nstest.NS) string {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, address string) (c net.Conn, err error) {
			if doErr := ns.Do(func() { c, err = (&net.Dialer{}).DialContext(ctx, network, address) }); doErr != nil {
				return nil, doErr
			}
			return c, err
		},
	}}
	defer client.CloseIdleConnections()
	req, err := http.NewRequest(http.MethodGet, "http://"+paymentsVIP+":8080"+testapp.WhoamiPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = paymentsAt + ":8080"
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", testapp.WhoamiPath, err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %q", testapp.WhoamiPath, resp.StatusCode, body)
	}
	return string(body)
}

// waitStat waits, up to 15 s, for counter to be above 0.
func waitStat(t testing.TB, what string, counter func() uint64) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for counter() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%s: still 0 after 15 s", what)
		}
		time.Sleep(20 * time.Millisecond) // polling Envoy's admin, not waiting for an outcome
	}
}

// nft loads ruleset into ns.
func nft(t testing.TB, ns *nstest.NS, ruleset string) {
	t.Helper()
	cmd := exec.Command("ip", "netns", "exec", ns.Name, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(ruleset)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nft in %s: %v: %s", ns.Name, err, out)
	}
}
