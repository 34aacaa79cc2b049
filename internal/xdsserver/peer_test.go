// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdsserver

import (
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"golang.org/x/sys/unix"
)

// TestCallerOfAPeerTheKernelCannotHold: callerOf trusts a bare pid only on a kernel without
// SO_PEERPIDFD (ENOPROTOOPT). A kernel that has the option and answers EINVAL (6.5 to 6.15, for a
// process that exited after it connected) is refused: the pid may be another process's already,
// whose pod the caller would be taken for. The kernels' answers are given to callerOf (peerPIDFD),
// on a real unix connection; the real kernel's own answer is the control: the test process is
// held, and read.
func TestCallerOfAPeerTheKernelCannotHold(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	client, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	conn, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })

	// Whatever pid it is asked about, podOf says a pod runs it: a pid reused by another pod's
	// process, the case a refusal guards against.
	var asked int
	p := newPeerCredentials(func(int32) (string, error) { asked++; return "uid-of-another-pod", nil }, logr.Discard(), maxPerPod)
	real := peerPIDFD
	t.Cleanup(func() { peerPIDFD = real })
	for _, tc := range []struct {
		kernel string
		answer error
		want   string // the caller's pod, or what its error says
	}{
		{"its own", nil, "uid-of-another-pod"},
		{"without SO_PEERPIDFD", unix.ENOPROTOOPT, "uid-of-another-pod"},
		{"6.5 to 6.15, the caller gone", unix.EINVAL, "it exited after it connected"},
	} {
		peerPIDFD = real
		if tc.answer != nil {
			peerPIDFD = func(int) (int, error) { return -1, tc.answer }
		}
		asked = 0
		c := p.callerOf(conn)
		t.Logf("%s: %s", tc.kernel, c)
		switch {
		case tc.answer == unix.EINVAL && (c.Err == nil || !strings.Contains(c.Err.Error(), tc.want) || asked != 0):
			t.Errorf("a kernel %s (EINVAL): caller %s, its pod read %d times; want it refused unread, saying %q", tc.kernel, c, asked, tc.want)
		case tc.answer != unix.EINVAL && (c.Err != nil || c.PodUID != tc.want):
			t.Errorf("a kernel %s: caller %s, want pod UID %s", tc.kernel, c, tc.want)
		}
	}
}
