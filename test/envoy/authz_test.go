// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package envoy_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/hack/testapp"
	"github.com/aether-mesh/aether-operator/internal/accesslog"
	"github.com/aether-mesh/aether-operator/internal/accesslog/accesslogtest"
	"github.com/aether-mesh/aether-operator/internal/authz"
	"github.com/aether-mesh/aether-operator/internal/xds"
	"github.com/aether-mesh/aether-operator/internal/xds/xdssim"
	"github.com/aether-mesh/aether-operator/internal/xds/xdstest"
	"github.com/aether-mesh/aether-operator/internal/xds/xdswalk"
)

// The access-policy scenario (xdstest.AccessPolicy) live: payments' HTTP 8080 admits GET under
// /api from web/frontend alone, its TCP 9000 every identity of namespace web, its h2 9090 is
// open; frontend-0 (web) and batch-0 (ops) call it through their capture, as any meshed pod does,
// and payments-0's inbound listener, in the node's Envoy, decides.
const (
	paymentsVIP = "10.96.0.10"
	paymentsAt  = "payments.shop.aether.internal"
)

// TestAccessPolicyEnforcedLive: each row is a call of one of the two clients and what the mesh
// must do with it; the negative control runs the same scenario without its policies (the
// filters not rendered) and the call the policies deny reaches the application, so the rows can
// fail. Denials are counted by Envoy (the chains' RBAC stats) and by the agent's access log, by
// caller and service.
func TestAccessPolicyEnforcedLive(t *testing.T) {
	frontendID := xdstest.Identity("web", "frontend")
	batchID := xdstest.Identity("ops", "batch")
	for _, tc := range []struct {
		name     string
		policies bool
		// http3 turns the HTTP/3 hop on (SVIDs carrying its names): the HTTP rows cross it over
		// QUIC, to the inbound's HTTP/3 chains.
		http3 bool
	}{
		{"the policies rendered", true, false},
		{"the policies rendered, over the HTTP/3 hop", true, true},
		{"negative control: no policies", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := xdstest.Scenarios()["access-policy"]
			if !tc.policies {
				s.Policies = nil
			}
			reg := prometheus.NewRegistry()
			als := accesslog.New(accesslog.Options{NodeID: xdstest.ThisNode, Log: logr.Discard(), Registerer: reg})
			opts := meshOptions{accessLog: als}
			if tc.http3 {
				s.HopHTTP3, opts.svidDNS = true, hopDNSNames
			}
			lm := startMeshWith(t, s, opts)
			als.SetMesh(lm.mesh)
			e := lm.nodes[xdstest.ThisNode].envoy
			frontend := client{ns: lm.fabric.pods[xds.PodKey("web", "frontend-0")], podOf: lm.fabric.pod, window: 2 * time.Second}
			batch := client{ns: lm.fabric.pods[xds.PodKey("ops", "batch-0")], podOf: lm.fabric.pod, window: 2 * time.Second}
			get := func(c client, port int32, path string) xdswalk.Seen {
				return c.send(xdssim.Conn{DstIP: paymentsVIP, DstPort: uint32(port), HTTP: &xdssim.Request{
					Host: fmt.Sprintf("%s:%d", paymentsAt, port), Path: path}}, xdswalk.ShapeHTTP11)
			}

			if !tc.policies {
				// What the policies deny, without them: batch reaches the application on both
				// governed ports, and frontend's /admin too.
				if seen := get(batch, 8080, "/api/x"); seen.Kind != xdswalk.SawApp {
					t.Errorf("without policies, batch's GET /api/x: %s, want the application", seen)
				}
				if seen := get(frontend, 8080, "/admin"); seen.Kind != xdswalk.SawApp {
					t.Errorf("without policies, frontend's GET /admin: %s, want the application", seen)
				}
				if got := tcpExchange(t, batch, 9000); !got.echoed || !got.greeted {
					t.Errorf("without policies, batch's TCP connection: %s, want the greeting and its bytes echoed", got)
				}
				return
			}

			for _, row := range []struct {
				who     string
				c       client
				port    int32
				path    string
				allowed bool
			}{
				{"frontend", frontend, 8080, "/api/x", true},
				{"frontend", frontend, 8080, "/api", true},
				{"batch", batch, 8080, "/api/x", false},
				{"frontend", frontend, 8080, "/admin", false},
				{"frontend", frontend, 8080, "/apis", false},
				// Spellings of /admin that must not pass as /api/…: normalized first (or refused).
				{"frontend", frontend, 8080, "/api/../admin", false},
				{"frontend", frontend, 8080, "/api/%2e%2e/admin", false},
				{"frontend", frontend, 8080, "//admin", false},
				{"frontend", frontend, 8080, "/api/x%2F..%2F..%2Fadmin", false},
				// The open port admits anyone.
				{"batch", batch, 9090, "/admin", true},
			} {
				seen := get(row.c, row.port, row.path)
				t.Logf("%s GET :%d%s: %s", row.who, row.port, row.path, seen)
				switch {
				case row.allowed && seen.Kind != xdswalk.SawApp:
					t.Errorf("%s's GET :%d%s: %s, want the application", row.who, row.port, row.path, seen)
				case !row.allowed && seen.Kind == xdswalk.SawApp:
					t.Errorf("%s's GET :%d%s reached the application (%s): the policy does not hold", row.who, row.port, row.path, seen)
				case !row.allowed && seen.Status == 400:
					// An escaped slash is refused outright (path_with_escaped_slashes_action).
				case !row.allowed && (seen.Status != 403 || seen.Error != authz.DeniedError):
					t.Errorf("%s's GET :%d%s: %s, want 403 with %s: %s", row.who, row.port, row.path, seen, "x-aether-error", authz.DeniedError)
				}
			}
			if tc.http3 {
				// The rows crossed the hop over QUIC: the HTTP/3 chain of 8080 served them, its
				// RBAC filter denied what the policy denies.
				for _, stat := range []string{`^http\.in_h3_8080\.downstream_rq_total$`, `^http\.in_h3_8080\.rbac\.denied$`} {
					if n := statSum(t, e, regexp.MustCompile(stat)); n == 0 {
						t.Errorf("%s is 0: the HTTP rows did not cross the HTTP/3 hop", stat)
					}
				}
			}
			// Envoy spells a ':' of a cluster's name '_' in its stats.
			appBytes := func() uint64 {
				return statSum(t, e, regexp.MustCompile(`^cluster\.`+regexp.QuoteMeta(strings.ReplaceAll(xds.AppCluster(xds.PodKey("shop", "payments-0"), 9000), ":", "_"))+`\.upstream_cx_tx_bytes_total$`))
			}
			before := appBytes()
			if got := tcpExchange(t, frontend, 9000); !got.echoed {
				t.Errorf("frontend's TCP connection to 9000: %s, want its bytes echoed", got)
			}
			e.WaitFor(t, 10*time.Second, "frontend's bytes counted to the application", func() (bool, string) {
				n := appBytes()
				return n > before, fmt.Sprintf("%d bytes sent to the application", n)
			})
			appConnections := func() uint64 {
				return statSum(t, e, regexp.MustCompile(`^cluster\.`+regexp.QuoteMeta(strings.ReplaceAll(xds.AppCluster(xds.PodKey("shop", "payments-0"), 9000), ":", "_"))+`\.upstream_cx_total$`))
			}
			connectionsBefore := appConnections()
			// The handshake refuses batch's certificate (listener.<address>.ssl.fail_verify_san).
			refused := func() uint64 {
				return statSum(t, e, regexp.MustCompile(`^listener\..*_`+fmt.Sprint(meshv1alpha1.ProxyInboundPort)+`\.ssl\.fail_verify_san$`))
			}
			refusedBefore := refused()
			got := tcpExchange(t, batch, 9000)
			t.Logf("batch's TCP connection to 9000: %s", got)
			if got.echoed || got.greeted || !got.closed {
				t.Errorf("batch's TCP connection to 9000: %s, want it closed, neither greeted nor echoed (the application's first bytes must not reach a denied caller)", got)
			}
			e.WaitFor(t, 10*time.Second, "batch's connection refused in the handshake", func() (bool, string) {
				n := refused()
				return n > refusedBefore, fmt.Sprintf("ssl.fail_verify_san %d", n)
			})
			if n := appConnections(); n != connectionsBefore {
				t.Errorf("the denied connection reached the application (%d connections to it), want none", n-connectionsBefore)
			}

			// The agent's access log counts the denials by caller and service.
			for _, want := range []map[string]string{
				{"service": "shop/payments", "port": "8080", "caller": batchID, "protocol": "http"},
				{"service": "shop/payments", "port": "8080", "caller": frontendID, "protocol": "http"},
				{"service": "shop/payments", "port": "9000", "caller": batchID, "protocol": "tcp"},
			} {
				e.WaitFor(t, 20*time.Second, fmt.Sprintf("the access log counting denials %v", want), func() (bool, string) {
					v, err := accesslogtest.Value(reg, "aether_agent_access_denied_total", want)
					return err == nil && v > 0, fmt.Sprintf("%v (%v); counted: %s", v, err, series(t, reg))
				})
			}
			if v, err := accesslogtest.Value(reg, "aether_agent_access_denied_total", map[string]string{"caller": frontendID, "port": "9000"}); err == nil && v > 0 {
				t.Errorf("the access log counts %v denials of frontend on 9000, which it may call", v)
			}
		})
	}
}

// tcpResult is what a TCP client of a Hello server saw.
type tcpResult struct {
	greeted, echoed, closed bool
	read                    string
	err                     error
}

func (r tcpResult) String() string {
	return fmt.Sprintf("greeted %v, echoed %v, closed %v, read %q (%v)", r.greeted, r.echoed, r.closed, r.read, r.err)
}

// tcpExchange dials payments' port from c's namespace, sends the probe and reads until the
// connection ends or 5 s pass.
func tcpExchange(t testing.TB, c client, port int32) tcpResult {
	t.Helper()
	var conn net.Conn
	var err error
	if doErr := c.ns.Do(func() {
		conn, err = net.DialTimeout("tcp", net.JoinHostPort(paymentsVIP, fmt.Sprint(port)), 5*time.Second)
	}); doErr != nil || err != nil {
		t.Fatalf("dialling %s:%d: %v %v", paymentsVIP, port, doErr, err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	var r tcpResult
	if _, err := conn.Write([]byte(probe)); err != nil {
		r.err = err
	}
	// Read until the echo comes back (served), or the connection ends (closed), or 5 s pass.
	var buf bytes.Buffer
	chunk := make([]byte, 512)
	for !strings.Contains(buf.String(), probe) {
		n, readErr := conn.Read(chunk)
		buf.Write(chunk[:n])
		if readErr != nil {
			var timeout net.Error
			r.closed = !errors.As(readErr, &timeout) || !timeout.Timeout()
			if r.err == nil && !errors.Is(readErr, io.EOF) {
				r.err = readErr
			}
			break
		}
	}
	r.read = buf.String()
	r.greeted = strings.HasPrefix(r.read, testapp.HelloPrefix)
	r.echoed = strings.Contains(r.read, probe)
	return r
}

// series spells the access log's denial and request counters, for a failure.
func series(t testing.TB, reg *prometheus.Registry) string {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, f := range families {
		if f.GetName() != "aether_agent_access_denied_total" && f.GetName() != "aether_agent_requests_total" && f.GetName() != "aether_agent_tcp_connections_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			fmt.Fprintf(&b, "\n  %s%v %v", f.GetName(), m.GetLabel(), m.GetCounter().GetValue())
		}
	}
	return b.String()
}
