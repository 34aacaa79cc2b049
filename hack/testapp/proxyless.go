// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package testapp

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	xdscreds "google.golang.org/grpc/credentials/xds"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"
	_ "google.golang.org/grpc/xds" // the xds:/// resolver, its balancers and the file_watcher provider
)

// The pod's identity files, as the proxyless bootstrap names them (internal/proxyless): its SVID,
// its key and the trust bundle, PEM.
const (
	svidFile   = "svid.pem"
	keyFile    = "svid_key.pem"
	bundleFile = "bundle.pem"
)

// ServeInbound serves gRPC (the standard health service, SERVING) on host:port over mTLS with the
// SVID in identityDir, requiring a client certificate the bundle there verifies and that names an
// identity of trustDomain: a stand-in for the node's Envoy's inbound listener (<pod IP>:18008),
// where a proxyless gRPC client connects when no Envoy can run.
func ServeInbound(host string, port int, identityDir, trustDomain string) (io.Closer, error) {
	cert, err := tls.LoadX509KeyPair(filepath.Join(identityDir, svidFile), filepath.Join(identityDir, keyFile))
	if err != nil {
		return nil, fmt.Errorf("the inbound's SVID: %w", err)
	}
	bundle, err := os.ReadFile(filepath.Join(identityDir, bundleFile))
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(bundle) {
		return nil, fmt.Errorf("%s holds no certificate", filepath.Join(identityDir, bundleFile))
	}
	inDomain := "spiffe://" + trustDomain + "/"
	config := &tls.Config{
		MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert},
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool, NextProtos: []string{"h2"},
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			leaf, err := x509.ParseCertificate(raw[0])
			if err != nil {
				return err
			}
			for _, u := range leaf.URIs {
				if strings.HasPrefix(u.String(), inDomain) {
					return nil
				}
			}
			return fmt.Errorf("client certificate names no identity of %s: %v", trustDomain, leaf.URIs)
		},
	}
	l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return nil, err
	}
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(config)))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go func() { _ = srv.Serve(l) }()
	return closerFunc(func() error { srv.Stop(); return nil }), nil
}

// ServeProxylessClient serves HTTP on host:port for a test to drive a proxyless gRPC client of
// target (an xds:/// URI; grpc-go reads its bootstrap from GRPC_XDS_BOOTSTRAP_CONFIG): GET
// /spread?n=<count> makes that many health checks and answers, in JSON, how many each backend
// (its address, without the port) answered; 503 with the error when one fails. healthPath answers
// 200 "ok".
func ServeProxylessClient(host string, port int, target, healthPath string) (io.Closer, error) {
	creds, err := xdscreds.NewClientCredentials(xdscreds.ClientOptions{FallbackCreds: insecure.NewCredentials()})
	if err != nil {
		return nil, err
	}
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(creds))
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc(healthPath, func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	mux.HandleFunc("/spread", func(w http.ResponseWriter, r *http.Request) {
		n, err := strconv.Atoi(r.URL.Query().Get("n"))
		if err != nil || n < 1 || n > 10000 {
			http.Error(w, "n: want a count of RPCs from 1 to 10000", http.StatusBadRequest)
			return
		}
		counts, err := Spread(r.Context(), conn, n)
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		_ = json.NewEncoder(w).Encode(counts)
	})
	l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(l) }()
	return closerFunc(func() error { return errors.Join(srv.Close(), conn.Close()) }), nil
}

// Spread makes n health checks on conn and counts them by the address (without the port) of the
// backend that answered; the first failure ends it.
func Spread(ctx context.Context, conn *grpc.ClientConn, n int) (map[string]int, error) {
	counts := map[string]int{}
	for range n {
		rpc, cancel := context.WithTimeout(ctx, 5*time.Second)
		var p peer.Peer
		resp, err := healthpb.NewHealthClient(conn).Check(rpc, &healthpb.HealthCheckRequest{}, grpc.Peer(&p))
		cancel()
		if err == nil && resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			err = fmt.Errorf("health %v", resp.GetStatus())
		}
		if err != nil {
			return counts, err
		}
		host, _, err := net.SplitHostPort(p.Addr.String())
		if err != nil {
			return counts, err
		}
		counts[host]++
	}
	return counts, nil
}
