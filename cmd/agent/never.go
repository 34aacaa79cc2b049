// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"math"
	"net/netip"
	"strings"
	"time"

	"github.com/aether-mesh/aether-operator/internal/agent"
	"github.com/aether-mesh/aether-operator/internal/meshdns"
)

// captureOptions reads the capture flags (--capture-resync, --capture-exclude-uid,
// --capture-never) into the agent's capture options; a bad flag is refused naming it, its value
// and what it wants. The node's own addresses are no flag's: the agent follows them while it
// runs (capture.Options.Node).
func captureOptions(resync time.Duration, uid int64, never string) (*agent.CaptureOptions, error) {
	if resync <= 0 {
		return nil, fmt.Errorf("--capture-resync is %s; it must be positive, e.g. %s", resync, agent.DefaultCaptureResync)
	}
	opts := &agent.CaptureOptions{Resync: resync}
	switch {
	case uid == -1:
	case uid < 0 || uid > math.MaxUint32:
		return nil, fmt.Errorf("--capture-exclude-uid is %d; want a user ID (0..%d) or -1 for none", uid, uint32(math.MaxUint32))
	default:
		opts.ProxyUID = new(uint32(uid))
	}
	cidrs, err := parseCaptureNever(never)
	if err != nil {
		return nil, err
	}
	opts.Never = cidrs
	return opts, nil
}

// parseCaptureNever reads --capture-never: comma-separated CIDRs (or bare addresses) that capture
// never redirects, in any mode. A bad entry is refused naming it and the form wanted.
func parseCaptureNever(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for entry := range strings.SplitSeq(s, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		p, err := netip.ParsePrefix(entry)
		if err != nil {
			addr, addrErr := netip.ParseAddr(entry)
			if addrErr != nil || addr.Zone() != "" {
				return nil, fmt.Errorf("--capture-never: %q is neither a CIDR nor an address; want e.g. 10.0.0.0/8,fd00:ec2::254", entry)
			}
			p = netip.PrefixFrom(addr, addr.BitLen())
		}
		if p != p.Masked() {
			return nil, fmt.Errorf("--capture-never: %q has host bits set; did you mean %s?", entry, p.Masked())
		}
		out = append(out, p)
	}
	return out, nil
}

// dnsOptions are the mesh DNS's options (--mesh-dns, --mesh-dns-rate, --mesh-dns-burst); nil when
// it is off.
func dnsOptions(on bool, rate float64, burst int) (*agent.DNSOptions, error) {
	if !on {
		return nil, nil
	}
	if rate <= 0 || burst <= 0 {
		return nil, fmt.Errorf("--mesh-dns-rate is %v and --mesh-dns-burst %d; both must be positive, e.g. %d and %d (or --mesh-dns=false)",
			rate, burst, meshdns.DefaultRate, meshdns.DefaultBurst)
	}
	return &agent.DNSOptions{Rate: rate, Burst: burst}, nil
}
