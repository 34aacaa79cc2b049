// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package testapp

import (
	"bufio"
	"net"
	"testing"
	"time"

	"github.com/aether-mesh/aether-operator/internal/capture/apply/nstest"
)

// TestServeOriginalDst runs the capture listener's stand-in in a network namespace of its own
// (root; real kernel), on 127.0.0.1:18001 and [::1]:18001, with a hand-written nft redirect of
// VIP:18082 to port 18001 for each family, and dials from inside the namespace: a redirected
// connection is answered with the address it was dialled to; one dialled to the listener
// directly (no rewrite) is answered with the listener's own address, never a VIP; without the
// redirect the VIP's port answers nothing.
func TestServeOriginalDst(t *testing.T) {
	const vip4, vip6 = "10.96.0.10", "fd00:96::10"
	ns := nstest.New(t, vip4, vip6)
	for _, address := range []string{"127.0.0.1:18001", "[::1]:18001"} {
		var l net.Listener
		var err error
		if doErr := ns.Do(func() { l, err = net.Listen("tcp", address) }); doErr != nil {
			t.Fatal(doErr)
		}
		if err != nil {
			t.Fatalf("listening on %s: %v", address, err)
		}
		t.Cleanup(func() { _ = l.Close() })
		go ServeOriginalDst(l)
	}
	dial := func(address string) string {
		t.Helper()
		var answer string
		if err := ns.Do(func() { answer = DialOnce(address, 2*time.Second) }); err != nil {
			t.Fatal(err)
		}
		return answer
	}

	// No redirect yet: nothing listens on the VIP's 18082.
	if got := dial(vip4 + ":18082"); got != "error dial tcp "+vip4+":18082: connect: connection refused" {
		t.Fatalf("before the redirect, %s:18082 answered %q; want connection refused", vip4, got)
	}

	ns.Nft(t, "add table inet t")
	ns.Nft(t, "add chain inet t out { type nat hook output priority -100 ; }")
	ns.Nft(t, "add rule inet t out ip daddr "+vip4+" tcp dport 18082 redirect to :18001")
	ns.Nft(t, "add rule inet t out ip6 daddr "+vip6+" tcp dport 18082 redirect to :18001")

	for address, want := range map[string]string{
		vip4 + ":18082":        "original-dst " + vip4 + ":18082",
		"[" + vip6 + "]:18082": "original-dst [" + vip6 + "]:18082",
		// Tracked but not rewritten: the original destination is the listener itself.
		"127.0.0.1:18001": "original-dst 127.0.0.1:18001",
		"[::1]:18001":     "original-dst [::1]:18001",
	} {
		if got := dial(address); got != want {
			t.Errorf("dialling %s: answered %q, want %q", address, got, want)
		}
	}
}

// TestServePeer: the answer names the address the connection came from.
func TestServePeer(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go ServePeer(l)
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.7")}}
	c, err := d.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || line != PeerPrefix+" 127.0.0.7\n" {
		t.Errorf("answer %q, %v; want %q", line, err, PeerPrefix+" 127.0.0.7\n")
	}
}
