// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package apply_test

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The tests run on the real kernel, in network namespaces they create (ip netns add) and delete.
// Every address they dial is local to such a namespace (on its loopback interface): no
// packet leaves it, and nothing is sent from the host's namespace.

// nsSeq numbers this process's namespaces.
var nsSeq atomic.Int32

// podNS is a network namespace standing in for a pod's: its loopback interface up and holding
// addrs too (the mesh's VIPs and a non-mesh address), so that a dial to any of them is answered
// inside the namespace. (Loopback, not a dummy interface: the dummy module may be absent.)
type podNS struct {
	name, path string
}

// newPodNS creates a namespace with addrs on its loopback interface; it is deleted when t ends.
func newPodNS(t testing.TB, addrs ...string) *podNS {
	t.Helper()
	name := fmt.Sprintf("aecap-%d-%d", os.Getpid(), nsSeq.Add(1))
	run(t, "ip", "netns", "add", name)
	ns := &podNS{name: name, path: "/var/run/netns/" + name}
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v: %s", name, err, out)
		}
	})
	run(t, "ip", "-n", name, "link", "set", "lo", "up")
	for _, a := range addrs {
		ns.addAddr(t, a)
	}
	return ns
}

// addAddr puts address a on the namespace's loopback interface.
func (ns *podNS) addAddr(t testing.TB, a string) {
	t.Helper()
	prefix := "/32"
	if strings.Contains(a, ":") {
		prefix = "/128"
	}
	run(t, "ip", "-n", ns.name, "addr", "add", a+prefix, "dev", "lo")
}

// nft runs the nft command line tool in the namespace (tests only; the applier never does).
func (ns *podNS) nft(t testing.TB, args ...string) string {
	t.Helper()
	if _, err := exec.LookPath("nft"); err != nil {
		t.Fatalf("nft is not installed (apt-get install nftables; .ci/run installs it): %v", err)
	}
	return run(t, "ip", append([]string{"netns", "exec", ns.name, "nft"}, args...)...)
}

var handleRE = regexp.MustCompile(`# handle (\d+)`)

// ruleHandles are the handles of chain inet aether output's rules, in order, as nft lists them.
func (ns *podNS) ruleHandles(t testing.TB) []int {
	t.Helper()
	var handles []int
	for line := range strings.SplitSeq(ns.nft(t, "-a", "list", "chain", "inet", "aether", "output"), "\n") {
		if m := handleRE.FindStringSubmatch(line); m != nil && !strings.Contains(line, "chain output") {
			n, _ := strconv.Atoi(m[1])
			handles = append(handles, n)
		}
	}
	return handles
}

func run(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// do runs f on a thread that is in the namespace, so that the sockets f creates are the
// namespace's. The thread goes back to the process's namespace after; if it cannot, it is never
// handed to another goroutine again (it stays locked, and exits with this goroutine). Safe from
// any goroutine: it reports a failure instead of failing a test.
func (ns *podNS) do(f func()) error {
	runtime.LockOSThread()
	home, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer home.Close()
	target, err := os.Open(ns.path)
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("setns %s: %w", ns.path, err)
	}
	f()
	if err := unix.Setns(int(home.Fd()), unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("returning a thread to the host's network namespace: %w", err) // the thread stays locked
	}
	runtime.UnlockOSThread()
	return nil
}

// The listeners of a namespace: the proxy's capture port, which answers "captured <original
// destination>" (SO_ORIGINAL_DST, as Envoy's original_dst filter reads it), and wildcard servers
// on the ports the tests dial, which answer "direct <their own address>".
const (
	proxyCapture = "127.0.0.1:18001"
	captured     = "captured"
	direct       = "direct"
)

// serve starts the capture listener and a direct server on each of ports, in the namespace;
// they close when t ends.
func (ns *podNS) serve(t testing.TB, ports ...int) {
	t.Helper()
	ns.listen(t, proxyCapture, func(c *net.TCPConn) string {
		dst, err := originalDst(c)
		if err != nil {
			return "error " + err.Error()
		}
		return captured + " " + dst.String()
	})
	for _, p := range ports {
		ns.listen(t, "0.0.0.0:"+strconv.Itoa(p), func(c *net.TCPConn) string { return direct + " " + c.LocalAddr().String() })
	}
}

// listen accepts on address in the namespace and writes answer(conn) on each connection.
func (ns *podNS) listen(t testing.TB, address string, answer func(*net.TCPConn) string) {
	t.Helper()
	var ln net.Listener
	var err error
	if doErr := ns.do(func() { ln, err = net.Listen("tcp4", address) }); doErr != nil {
		t.Fatal(doErr)
	}
	if err != nil {
		t.Fatalf("listening on %s in %s: %v", address, ns.name, err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = fmt.Fprintln(c, answer(c.(*net.TCPConn)))
			c.Close()
		}
	}()
}

// dial connects from the namespace to address and returns what answered: "captured <original
// destination>", "direct <address>", or the error. Safe from any goroutine.
func (ns *podNS) dial(address string) string {
	var c net.Conn
	var err error
	if doErr := ns.do(func() { c, err = net.DialTimeout("tcp", address, 2*time.Second) }); doErr != nil {
		return "error entering the namespace: " + doErr.Error()
	}
	if err != nil {
		if errno, ok := errors.AsType[unix.Errno](err); ok {
			return "error " + errno.Error()
		}
		return "error " + err.Error()
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return "error reading the answer: " + err.Error()
	}
	return strings.TrimSpace(line)
}

// originalDst is the destination a redirected connection was addressed to, as the kernel's NAT
// recorded it: getsockopt(SOL_IP, SO_ORIGINAL_DST), a struct sockaddr_in.
func originalDst(c *net.TCPConn) (netip.AddrPort, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return netip.AddrPort{}, err
	}
	var dst netip.AddrPort
	var optErr error
	if err := raw.Control(func(fd uintptr) {
		// sockaddr_in is 16 bytes: family, port (network order), address, padding. The 20-byte
		// ipv6_mreq of GetsockoptIPv6Mreq holds it whole.
		mreq, err := unix.GetsockoptIPv6Mreq(int(fd), unix.SOL_IP, unix.SO_ORIGINAL_DST)
		if err != nil {
			optErr = err
			return
		}
		sa := mreq.Multiaddr
		dst = netip.AddrPortFrom(netip.AddrFrom4([4]byte(sa[4:8])), binary.BigEndian.Uint16(sa[2:4]))
	}); err != nil {
		return netip.AddrPort{}, err
	}
	return dst, optErr
}
