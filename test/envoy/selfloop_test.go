// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package envoy_test

import (
	"errors"
	"fmt"
	"io"
	"net"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/aether-mesh/aether-operator/internal/xds"
	"github.com/aether-mesh/aether-operator/internal/xds/xdstest"
)

// TestTheCaptureListenerRefusesItself: a pod that dials its capture listener directly
// (127.0.0.1:18001, no redirect: the original destination is the listener itself) is closed at
// once, raw bytes or HTTP. Passed through, the connection would go to its original destination,
// the listener again, and again: one dial became a chain of the node proxy's connections.
// Read on the wire: the listener accepts one connection per dial, and the client sees the close.
func TestTheCaptureListenerRefusesItself(t *testing.T) {
	lm := startMesh(t, xdstest.Scenarios()["mixed-http-primary"], nil)
	frontend := lm.fabric.pods[xds.PodKey("web", "frontend-0")]
	e := lm.nodes[xdstest.ThisNode].envoy
	accepted := regexp.MustCompile(`^listener\.127\.0\.0\.1_18001\.downstream_cx_total$`)
	count := func() uint64 { return statSum(t, e, accepted) }
	for _, sent := range []string{"raw bytes\n", "GET / HTTP/1.1\r\nHost: 127.0.0.1:18001\r\n\r\n"} {
		before := count()
		var c net.Conn
		var err error
		if doErr := frontend.Do(func() { c, err = net.DialTimeout("tcp", "127.0.0.1:18001", 5*time.Second) }); doErr != nil || err != nil {
			t.Fatalf("dialling the capture listener: %v %v", doErr, err)
		}
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write([]byte(sent)); err != nil {
			t.Fatalf("writing %q: %v", sent, err)
		}
		got, err := io.ReadAll(c)
		_ = c.Close()
		// The listener counts the connection once it has one (after its listener filters), which
		// a reset may outrun: wait for the count to move, then read what it came to.
		e.WaitFor(t, 5*time.Second, "the capture listener counts the dial", func() (bool, string) {
			n := count()
			return n > before, fmt.Sprintf("%d connections since the dial", n-before)
		})
		after := count()
		t.Logf("%q: read %q (%v); the listener accepted %d connections", sent, got, err, after-before)
		// Closed at once: a FIN, or a reset when the proxy closed before it read what was sent.
		if err != nil && !errors.Is(err, syscall.ECONNRESET) {
			t.Errorf("%q: %v, want the connection closed by the proxy", sent, err)
		}
		if after-before != 1 {
			t.Errorf("%q: the capture listener accepted %d connections for one dial, want 1 (a loop through itself)", sent, after-before)
		}
	}
}
