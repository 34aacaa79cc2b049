// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Package nstest is test support for capture on the real kernel: network namespaces standing in
// for pods' (ip netns add, deleted when the test ends), each with its addresses on its own
// loopback interface, the proxy's capture listener (127.0.0.1:18001, answering the connection's
// SO_ORIGINAL_DST) and direct servers, and dials from inside it. No packet leaves a namespace,
// and nothing is sent from the host's. It runs ip and nft: tests only.
package nstest

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
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/aether-mesh/aether-operator/internal/testroot"
)

// nsSeq numbers this process's namespaces.
var nsSeq atomic.Int32

// NS is a network namespace standing in for a pod's: its loopback interface up and holding the
// addresses given too (the mesh's VIPs and a non-mesh address), so that a dial to any of them is
// answered inside the namespace. (Loopback, not a dummy interface: the dummy module may be absent.)
type NS struct {
	// Name is its name (ip netns), Path the file that pins it (what the CNI plugin hands over).
	Name, Path string
}

// New creates a namespace with addrs on its loopback interface; it is deleted when t ends.
func New(t testing.TB, addrs ...string) *NS {
	t.Helper()
	return NewNamed(t, "aecap", addrs...)
}

// NewNamed is New with the namespace's name starting with prefix (then this process's pid and a
// sequence number): a package's tests keep their namespaces apart from other packages'.
func NewNamed(t testing.TB, prefix string, addrs ...string) *NS {
	t.Helper()
	testroot.Require(t, "network namespaces and nftables")
	name := fmt.Sprintf("%s-%d-%d", prefix, os.Getpid(), nsSeq.Add(1))
	ip(t, "netns", "add", name)
	ns := &NS{Name: name, Path: "/var/run/netns/" + name}
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v: %s", name, err, out)
		}
	})
	ip(t, "-n", name, "link", "set", "lo", "up")
	for _, a := range addrs {
		ns.AddAddr(t, a)
	}
	return ns
}

// AddAddr puts address a on the namespace's loopback interface.
func (ns *NS) AddAddr(t testing.TB, a string) {
	t.Helper()
	prefix := "/32"
	if strings.Contains(a, ":") {
		prefix = "/128"
	}
	ip(t, "-n", ns.Name, "addr", "add", a+prefix, "dev", "lo")
}

// DisableIPv6 turns IPv6 off in the namespace, as sysctl net.ipv6.conf.{all,lo}.disable_ipv6=1
// would (written to /proc/sys from inside it: /proc/sys/net is the writer's namespace's), as a
// pod's can be: its loopback loses ::1.
func (ns *NS) DisableIPv6(t testing.TB) {
	t.Helper()
	for _, dev := range []string{"all", "lo"} {
		file := "/proc/sys/net/ipv6/conf/" + dev + "/disable_ipv6"
		ip(t, "netns", "exec", ns.Name, "sh", "-c", "echo 1 > "+file)
	}
}

// Link joins ns and peer with a veth pair: ns's end holds local, peer's end remote (both in one
// /24), and ns routes every destination to peer, so that a dial from ns that capture leaves alone
// reaches peer's servers from ns's address, as a pod's leaves through its interface. Nothing is
// routed further than peer.
func (ns *NS) Link(t testing.TB, peer *NS, local, remote string) {
	t.Helper()
	name := fmt.Sprintf("aev%d", nsSeq.Add(1))
	ip(t, "link", "add", name, "netns", ns.Name, "type", "veth", "peer", "name", name+"p", "netns", peer.Name)
	ip(t, "-n", ns.Name, "addr", "add", local+"/24", "dev", name)
	ip(t, "-n", peer.Name, "addr", "add", remote+"/24", "dev", name+"p")
	ip(t, "-n", ns.Name, "link", "set", name, "up")
	ip(t, "-n", peer.Name, "link", "set", name+"p", "up")
	ip(t, "-n", ns.Name, "route", "add", "default", "via", remote)
}

// IP runs the ip tool on the namespace (ip -n <name> args...), failing t on an error.
func (ns *NS) IP(t testing.TB, args ...string) {
	t.Helper()
	ip(t, append([]string{"-n", ns.Name}, args...)...)
}

// IPVSInterface gives the namespace kube-proxy's IPVS interface, kube-ipvs0, holding addrs (/32
// or /128 each; the interface down, as kube-proxy keeps it). kube-proxy makes it a dummy; on a
// kernel without the dummy driver (some test machines' have none) it is an ifb of that name.
func (ns *NS) IPVSInterface(t testing.TB, addrs ...string) {
	t.Helper()
	const name = "kube-ipvs0"
	if out, err := exec.Command("ip", "-n", ns.Name, "link", "add", name, "type", "dummy").CombinedOutput(); err != nil {
		t.Logf("no dummy interface here (%s): %s is an ifb", strings.TrimSpace(string(out)), name)
		ns.IP(t, "link", "add", name, "type", "ifb")
	}
	for _, a := range addrs {
		prefix := "/32"
		if strings.Contains(a, ":") {
			prefix = "/128"
		}
		ns.IP(t, "addr", "add", a+prefix, "dev", name)
	}
}

// Nft runs the nft command line tool in the namespace (tests only; the applier never does).
func (ns *NS) Nft(t testing.TB, args ...string) string {
	t.Helper()
	if _, err := exec.LookPath("nft"); err != nil {
		t.Fatalf("nft is not installed (apt-get install nftables; .ci/run installs it): %v", err)
	}
	return ip(t, append([]string{"netns", "exec", ns.Name, "nft"}, args...)...)
}

// elementRE is one element of a set of addresses, as nft lists it.
var elementRE = regexp.MustCompile(`[0-9a-f.:]*[0-9a-f]`)

// SetElements are the elements of set name of the namespace's table inet aether, a set of
// addresses, as nft lists them: what the kernel holds.
func (ns *NS) SetElements(t testing.TB, name string) []string {
	t.Helper()
	_, elements, ok := strings.Cut(ns.Nft(t, "list", "set", "inet", "aether", name), "elements = {")
	if !ok {
		return nil
	}
	elements, _, _ = strings.Cut(elements, "}")
	return elementRE.FindAllString(elements, -1)
}

var handleRE = regexp.MustCompile(`# handle (\d+)`)

// RuleHandles are the handles of chain inet aether output's rules, in order, as nft lists them.
func (ns *NS) RuleHandles(t testing.TB) []int {
	t.Helper()
	var handles []int
	for line := range strings.SplitSeq(ns.Nft(t, "-a", "list", "chain", "inet", "aether", "output"), "\n") {
		if m := handleRE.FindStringSubmatch(line); m != nil && !strings.Contains(line, "chain output") {
			n, _ := strconv.Atoi(m[1])
			handles = append(handles, n)
		}
	}
	return handles
}

// ip runs the ip tool with args.
func ip(t testing.TB, args ...string) string {
	t.Helper()
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// Do runs f on a thread that is in the namespace, so that the sockets f creates are the
// namespace's. The thread goes back to the process's namespace after; if it cannot, it is never
// handed to another goroutine again (it stays locked, and exits with this goroutine). Safe from
// any goroutine: it reports a failure instead of failing a test.
func (ns *NS) Do(f func()) error {
	runtime.LockOSThread()
	home, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer home.Close()
	target, err := os.Open(ns.Path)
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("setns %s: %w", ns.Path, err)
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
	ProxyCapture = "127.0.0.1:18001"
	Captured     = "captured"
	Direct       = "direct"
)

// Serve starts the capture listener and a direct server on each of ports, in the namespace;
// they close when t ends.
func (ns *NS) Serve(t testing.TB, ports ...int) {
	t.Helper()
	ns.Listen(t, ProxyCapture, func(c *net.TCPConn) string {
		dst, err := OriginalDst(c)
		if err != nil {
			return "error " + err.Error()
		}
		return Captured + " " + dst.String()
	})
	for _, p := range ports {
		ns.Listen(t, "0.0.0.0:"+strconv.Itoa(p), func(c *net.TCPConn) string { return Direct + " " + c.LocalAddr().String() })
	}
}

// Listen accepts on address in the namespace and writes answer(conn) on each connection.
func (ns *NS) Listen(t testing.TB, address string, answer func(*net.TCPConn) string) {
	t.Helper()
	var ln net.Listener
	var err error
	if doErr := ns.Do(func() { ln, err = net.Listen("tcp4", address) }); doErr != nil {
		t.Fatal(doErr)
	}
	if err != nil {
		t.Fatalf("listening on %s in %s: %v", address, ns.Name, err)
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

// Dial connects from the namespace to address and returns what answered: "captured <original
// destination>", "direct <address>", or the error. Safe from any goroutine.
func (ns *NS) Dial(address string) string { return ns.DialMarked(address, 0) }

// DialMarked is Dial from a socket carrying mark (SO_MARK; none when 0), as the proxy marks the
// sockets it opens in a pod's namespace.
func (ns *NS) DialMarked(address string, mark uint32) string {
	var c net.Conn
	var err error
	dialer := net.Dialer{Timeout: 2 * time.Second}
	if mark != 0 {
		dialer.Control = func(_, _ string, raw syscall.RawConn) error {
			var optErr error
			if err := raw.Control(func(fd uintptr) { optErr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_MARK, int(mark)) }); err != nil {
				return err
			}
			return optErr
		}
	}
	if doErr := ns.Do(func() { c, err = dialer.Dial("tcp", address) }); doErr != nil {
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

// OriginalDst is the destination a redirected connection was addressed to, as the kernel's NAT
// recorded it: getsockopt(SOL_IP, SO_ORIGINAL_DST), a struct sockaddr_in.
func OriginalDst(c *net.TCPConn) (netip.AddrPort, error) {
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
