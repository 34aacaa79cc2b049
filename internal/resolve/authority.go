// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package resolve

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// MaxHostLength is the longest host an authority may carry: a DNS name's limit.
const MaxHostLength = 253

// maxAuthorityLength is the longest well-formed authority: a host and ":65535".
const maxAuthorityLength = MaxHostLength + len(":65535")

// authority is a well-formed authority: a host and, unless portless, a port.
type authority struct {
	host     string
	port     int32 // 1..65535 when !portless
	portless bool
}

// String spells the authority as a Host header carries it.
func (a authority) String() string {
	if a.portless {
		return a.host
	}
	return a.host + ":" + strconv.Itoa(int(a.port))
}

// parseAuthority splits host[:port] (RFC 3986 section 3.2, as a Host header carries it) strictly:
// the port, when present, is canonical decimal in 1..65535 (no sign, no leading zero, not empty),
// so that the authority a data plane matches as a string and the port this package answers for
// are the same. The error says what is wrong and what to write instead.
func parseAuthority(s string) (authority, error) {
	switch {
	case s == "":
		return authority{}, fmt.Errorf("the authority is empty: name the service and its port, as in Host: payments.shop:8080")
	case len(s) > maxAuthorityLength:
		return authority{}, fmt.Errorf("the authority is %d bytes long: a host name is at most %d bytes, and a port 5 digits",
			len(s), MaxHostLength)
	}
	host, port, hasPort, err := splitHostPort(s)
	if err != nil {
		return authority{}, err
	}
	if err := checkHost(host); err != nil {
		return authority{}, err
	}
	if !hasPort {
		return authority{host: host, portless: true}, nil
	}
	n, err := parsePort(host, port)
	if err != nil {
		return authority{}, err
	}
	return authority{host: host, port: n}, nil
}

// splitHostPort splits at the port's colon: the one after "]" for an IPv6 literal, else the only
// colon. hasPort is whether a colon was there, even with nothing after it.
func splitHostPort(s string) (host, port string, hasPort bool, err error) {
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return "", "", false, fmt.Errorf("%q opens an IPv6 address with [ and does not close it: write [<address>] or [<address>]:<port>", s)
		}
		host, rest := s[:end+1], s[end+1:]
		if rest == "" {
			return host, "", false, nil
		}
		if rest[0] != ':' {
			return "", "", false, fmt.Errorf("%q has %q after the IPv6 address: only :<port> may follow ]", s, rest)
		}
		return host, rest[1:], true, nil
	}
	switch strings.Count(s, ":") {
	case 0:
		return s, "", false, nil
	case 1:
		i := strings.IndexByte(s, ':')
		return s[:i], s[i+1:], true, nil
	}
	return "", "", false, fmt.Errorf("%q has more than one colon: an IPv6 address is written in brackets, as [fd00::1]:8080", s)
}

// checkHost accepts a DNS name or IPv4 address (letters, digits, '-', '.', '_'), or an IPv6
// address in brackets. Which service the host names is the caller's concern; this only keeps
// what the answer echoes well-formed.
func checkHost(host string) error {
	if host == "" {
		return fmt.Errorf("the authority has no host before its port: name the service, as in Host: payments.shop:8080")
	}
	if len(host) > MaxHostLength {
		return fmt.Errorf("the host is %d bytes long: a host name is at most %d bytes", len(host), MaxHostLength)
	}
	if inner, ok := strings.CutPrefix(host, "["); ok {
		if ip, err := netip.ParseAddr(strings.TrimSuffix(inner, "]")); err != nil || !ip.Is6() || ip.Zone() != "" {
			return fmt.Errorf("%q is not an IPv6 address in brackets (no zone), as in [fd00::1]", host)
		}
		return nil
	}
	for _, r := range host {
		if !isHostChar(r) {
			return fmt.Errorf("the host %q has %q: a host is a DNS name or an IP address (letters, digits, '-', '.')", host, r)
		}
	}
	return nil
}

func isHostChar(r rune) bool {
	return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '-' || r == '.' || r == '_'
}

// parsePort reads a port in canonical decimal: "80", never "080", "+80" or "".
func parsePort(host, port string) (int32, error) {
	if port == "" {
		return 0, fmt.Errorf("the port after %q is empty: write %s for port 80, or %s:<port>", host+":", host, host)
	}
	if strings.Trim(port, "0123456789") != "" {
		return 0, fmt.Errorf("the port %q is not a decimal number: write %s:<port>, port 1..65535", port, host)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return 0, fmt.Errorf("the port %q is outside 1..65535", port)
	}
	if port[0] == '0' {
		return 0, fmt.Errorf("the port %q has a leading zero: write %s:%d", port, host, n)
	}
	return int32(n), nil
}
