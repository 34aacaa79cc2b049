// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package testapp

import (
	"crypto/sha1" // RFC 6455 fixes SHA-1 for the accept key; nothing is protected by it
	"encoding/base64"
	"io"
	"net/http"
	"strings"
	"time"
)

// A WebSocket (RFC 6455) is accepted on every HTTP server, in either form a proxy may deliver it:
// an HTTP/1.1 Upgrade (answered 101 Switching Protocols), or an HTTP/2 extended CONNECT (RFC
// 8441, :protocol websocket; answered 200), which a proxy speaking HTTP/2 to the application sends
// instead. Go's HTTP/2 server takes an extended CONNECT only when GODEBUG has http2xconnect=1
// (read once, when net/http starts): without it the request is refused before any handler runs.
// Once accepted, the stream echoes its bytes as they are, unframed: what a test checks is that the
// upgraded stream carries bytes both ways, not WebSocket's framing.

// websocketGUID is RFC 6455's magic string for the accept key.
const websocketGUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

func isWebSocket(r *http.Request) bool {
	if r.ProtoMajor == 2 {
		return r.Method == http.MethodConnect && strings.EqualFold(r.Header.Get(":protocol"), "websocket")
	}
	return strings.EqualFold(r.Header.Get("Upgrade"), "websocket") && headerHasToken(r.Header, "Connection", "upgrade")
}

func headerHasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for t := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// serveWebSocket accepts r's upgrade and echoes the stream for up to a minute.
func serveWebSocket(w http.ResponseWriter, r *http.Request) {
	deadline := time.Now().Add(time.Minute)
	if r.ProtoMajor == 2 {
		rc := http.NewResponseController(w)
		w.WriteHeader(http.StatusOK)
		if err := rc.Flush(); err != nil {
			return
		}
		_ = rc.SetReadDeadline(deadline)
		_ = rc.SetWriteDeadline(deadline)
		buf := make([]byte, 4096)
		for {
			n, err := r.Body.Read(buf)
			if n > 0 {
				if _, werr := w.Write(buf[:n]); werr != nil || rc.Flush() != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}
	conn, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	defer conn.Close()
	_ = conn.SetDeadline(deadline)
	sum := sha1.Sum([]byte(r.Header.Get("Sec-WebSocket-Key") + websocketGUID))
	h := w.Header().Clone()
	h.Set("Upgrade", "websocket")
	h.Set("Connection", "Upgrade")
	h.Set("Sec-WebSocket-Accept", base64.StdEncoding.EncodeToString(sum[:]))
	if _, err := io.WriteString(rw, "HTTP/1.1 101 Switching Protocols\r\n"); err != nil {
		return
	}
	if err := h.Write(rw); err != nil {
		return
	}
	if _, err := io.WriteString(rw, "\r\n"); err != nil || rw.Flush() != nil {
		return
	}
	// What the client sent after its request is in rw's buffer already; then the connection.
	_, _ = io.Copy(conn, rw)
}
