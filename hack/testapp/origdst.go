// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package testapp

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// ip6tSoOriginalDst is IP6T_SO_ORIGINAL_DST of <linux/netfilter_ipv6/ip6_tables.h>, which
// golang.org/x/sys does not define: the same number as SO_ORIGINAL_DST, at level SOL_IPV6.
const ip6tSoOriginalDst = 80

// OriginalDstPrefix starts each answer of ServeOriginalDst: "original-dst <address:port>".
const OriginalDstPrefix = "original-dst"

// ServeOriginalDst plays a meshed pod's capture listener (127.0.0.1:18001): on each connection
// l accepts it writes one line, "original-dst <the destination the connection was dialled to>"
// as the kernel's NAT recorded it (SO_ORIGINAL_DST), or "error <why>", and closes it. It returns
// when l is closed.
func ServeOriginalDst(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		answer := originalDstAnswer(c)
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		_, _ = fmt.Fprintln(c, answer)
		_ = c.Close()
	}
}

// OriginalDst is the destination c was addressed to before a redirect or DNAT rewrote it:
// getsockopt(SOL_IP, SO_ORIGINAL_DST) for IPv4, (SOL_IPV6, IP6T_SO_ORIGINAL_DST) for IPv6. On a
// connection that was not rewritten but is tracked, it is c's own local address; on one conntrack
// never saw, the kernel answers ENOENT.
func OriginalDst(c *net.TCPConn) (netip.AddrPort, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return netip.AddrPort{}, err
	}
	v6 := c.LocalAddr().(*net.TCPAddr).IP.To4() == nil
	var dst netip.AddrPort
	var optErr error
	if err := raw.Control(func(fd uintptr) {
		if v6 {
			dst, optErr = originalDst6(int(fd))
		} else {
			dst, optErr = originalDst4(int(fd))
		}
	}); err != nil {
		return netip.AddrPort{}, err
	}
	return dst, optErr
}

// originalDst4 reads a struct sockaddr_in (16 bytes: family, port in network order, address,
// padding); the 20-byte ipv6_mreq of GetsockoptIPv6Mreq holds it whole.
func originalDst4(fd int) (netip.AddrPort, error) {
	mreq, err := unix.GetsockoptIPv6Mreq(fd, unix.SOL_IP, unix.SO_ORIGINAL_DST)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("getsockopt(SOL_IP, SO_ORIGINAL_DST): %w", err)
	}
	b := mreq.Multiaddr
	port := binary.BigEndian.Uint16(b[2:4])
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[4:8])), port), nil
}

// originalDst6 reads a struct sockaddr_in6 (28 bytes); IPv6MTUInfo begins with one.
func originalDst6(fd int) (netip.AddrPort, error) {
	info, err := unix.GetsockoptIPv6MTUInfo(fd, unix.SOL_IPV6, ip6tSoOriginalDst)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("getsockopt(SOL_IPV6, IP6T_SO_ORIGINAL_DST): %w", err)
	}
	// The port field holds network byte order in memory: lay it out as it lies, read it big-endian.
	var port [2]byte
	binary.NativeEndian.PutUint16(port[:], info.Addr.Port)
	return netip.AddrPortFrom(netip.AddrFrom16(info.Addr.Addr), binary.BigEndian.Uint16(port[:])), nil
}

// DialOnce connects to address, reads the first line it is sent and returns it without its
// newline; every failure comes back as "error <why>", so a caller can print one line either way.
func DialOnce(address string, timeout time.Duration) string {
	c, err := net.DialTimeout("tcp", address, timeout)
	if err != nil {
		return "error " + err.Error()
	}
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(timeout))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return "error reading from " + address + ": " + err.Error()
	}
	return strings.TrimSpace(line)
}

// PeerPrefix starts each answer of ServePeer: "peer <the connection's source address>".
const PeerPrefix = "peer"

// ServePeer answers each connection l accepts with one line, "peer <its source IP>", and closes
// it: who the server sees calling (a pod's own address, or a node's when a proxy re-opened the
// connection from the node). It returns when l is closed.
func ServePeer(l net.Listener) { ServePeerAs(l, "", 0) }

// ServePeerAs is ServePeer naming the server too, "peer <source IP> at <name>" when name is set
// (which of a service's pods a connection reached), and holding each connection delay before it
// answers: a request in flight, for as long as delay, through whatever carries it (a proxy that
// stops meanwhile breaks it).
func ServePeerAs(l net.Listener, name string, delay time.Duration) {
	suffix := ""
	if name != "" {
		suffix = " at " + name
	}
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			peer := c.RemoteAddr().String()
			if tcp, ok := c.RemoteAddr().(*net.TCPAddr); ok {
				peer = tcp.IP.String()
			}
			time.Sleep(delay)
			_ = c.SetDeadline(time.Now().Add(5 * time.Second))
			_, _ = fmt.Fprintln(c, PeerPrefix+" "+peer+suffix)
			_ = c.Close()
		}()
	}
}

// originalDstAnswer is the line answering connection c: its original destination after the
// prefix, or why there is none.
func originalDstAnswer(c net.Conn) string {
	tcp, ok := c.(*net.TCPConn)
	if !ok {
		return "error not a TCP connection"
	}
	dst, err := OriginalDst(tcp)
	if err != nil {
		return "error " + err.Error()
	}
	return OriginalDstPrefix + " " + dst.String()
}

// GetOnce sends GET url with the Host header host (the URL's own when empty) and returns one line:
// "<status code> <the body's first line>", with "x-aether-error=<value>" before the body when the
// mesh answered with one, or "error <why>". A mesh routes an HTTP request by its Host, so a client
// dialling a VIP names the service there.
func GetOnce(url, host string, timeout time.Duration) string {
	return RequestOnce(http.MethodGet, url, host, timeout)
}

// RequestOnce is GetOnce with another method (a POST, whose reset the mesh must not retry): the
// same line, "<method> " before it when the method is not GET.
func RequestOnce(method, url, host string, timeout time.Duration) string {
	// A connection per request: each GET is one more trip through capture and the proxy. No
	// proxy from the environment (Proxy nil): the dial is capture's to take.
	client := &http.Client{Timeout: timeout, Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil}}
	return Request(client, method, url, host)
}

// Request is RequestOnce's line for one request sent with client (one that dials as its caller
// needs, e.g. from another network namespace).
func Request(client *http.Client, method, url, host string) string {
	_, answer := send(client, method, url, host)
	return methodPrefix(method) + answer
}

// methodPrefix starts an answer line of a request that is not a GET: its method and a space.
func methodPrefix(method string) string {
	if method == http.MethodGet {
		return ""
	}
	return method + " "
}

// send sends one request with client and returns its status (0 when there was no answer) and
// the answer line of GetOnce.
func send(client *http.Client, method, url, host string) (int, string) {
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		return 0, "error " + err.Error()
	}
	req.Host = host
	resp, err := client.Do(req)
	if err != nil {
		return 0, "error " + err.Error()
	}
	defer func() { _ = resp.Body.Close() }()
	line, err := bufio.NewReader(io.LimitReader(resp.Body, 4096)).ReadString('\n')
	if err != nil && err != io.EOF {
		return 0, fmt.Sprintf("error reading the answer of %s (%d): %v", url, resp.StatusCode, err)
	}
	// The rest of the body, so that the connection goes back to a keep-alive pool.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	answer := strconv.Itoa(resp.StatusCode)
	if e := resp.Header.Get("x-aether-error"); e != "" {
		answer += " x-aether-error=" + e
	}
	return resp.StatusCode, answer + " " + strings.TrimSpace(line)
}
