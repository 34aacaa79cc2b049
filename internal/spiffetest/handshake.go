// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package spiffetest

import (
	"crypto/tls"
	"net"
	"time"

	"github.com/spiffe/go-spiffe/v2/bundle/x509bundle"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/spiffetls/tlsconfig"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"
)

// Handshake is an mTLS handshake on loopback: a server presenting serverSVID, a client presenting
// clientSVID and accepting only the server ID pinned. It returns the client's error.
func Handshake(serverSVID, clientSVID *x509svid.SVID, bundle *x509bundle.Bundle, pinned spiffeid.ID) error {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer l.Close()
	serverConfig := tlsconfig.MTLSServerConfig(serverSVID, bundle, tlsconfig.AuthorizeMemberOf(bundle.TrustDomain()))
	go func() {
		conn, err := l.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		_ = tls.Server(conn, serverConfig).Handshake()
	}()
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", l.Addr().String(),
		tlsconfig.MTLSClientConfig(clientSVID, bundle, tlsconfig.AuthorizeID(pinned)))
	if err != nil {
		return err
	}
	return conn.Close()
}
