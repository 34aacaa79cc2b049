// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package nodeaddrs

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// Read is the addresses of the interfaces that count (Counts) in the network namespace at path
// ("" for the caller's own: the agent's, which is the node's), each once, sorted; link-local
// ones are left out (every IPv6 interface has one, and capture returns them all anyway). Reading
// takes no privilege: two rtnetlink dumps, the links' and the addresses'.
func Read(path string) ([]netip.Addr, error) {
	addrs, _, err := read(path)
	return addrs, err
}

// read is Read, with the indexes of the interfaces that do not count.
func read(path string) ([]netip.Addr, map[uint32]bool, error) {
	c, err := dial(path, 0)
	if err != nil {
		return nil, nil, err
	}
	defer c.Close()
	links, err := readLinks(c)
	if err != nil {
		return nil, nil, err
	}
	addrs, err := readAddrs(c)
	if err != nil {
		return nil, nil, err
	}
	var out []netip.Addr
	for _, a := range addrs {
		if l, ok := links[a.index]; ok && Counts(l) && !a.addr.IsLinkLocalUnicast() {
			out = append(out, a.addr)
		}
	}
	left := map[uint32]bool{}
	for index, l := range links {
		if !Counts(l) {
			left[index] = true
		}
	}
	return Merge(out), left, nil
}

// dial opens an rtnetlink socket in the network namespace at path ("" for the caller's own),
// joined to the multicast groups given.
func dial(path string, groups uint32) (*netlink.Conn, error) {
	cfg := &netlink.Config{Groups: groups}
	if path != "" {
		f, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("opening the node's network namespace %s: %w", path, err)
		}
		defer f.Close() // the socket, once open, stays in the namespace
		cfg.NetNS = int(f.Fd())
	}
	c, err := netlink.Dial(unix.NETLINK_ROUTE, cfg)
	if err != nil {
		return nil, fmt.Errorf("opening an rtnetlink socket%s: %w", in(path), err)
	}
	return c, nil
}

func in(path string) string {
	if path == "" {
		return ""
	}
	return " in " + path
}

// dump sends an rtnetlink dump request of type typ with header hdr and returns the answers of
// type want.
func dump(c *netlink.Conn, typ, want uint16, hdr []byte) ([]netlink.Message, error) {
	msgs, err := c.Execute(netlink.Message{
		Header: netlink.Header{Type: netlink.HeaderType(typ), Flags: netlink.Request | netlink.Dump},
		Data:   hdr,
	})
	if err != nil {
		return nil, err
	}
	out := msgs[:0]
	for _, m := range msgs {
		if m.Header.Type == netlink.HeaderType(want) {
			out = append(out, m)
		}
	}
	return out, nil
}

// readLinks are the namespace's interfaces by index: RTM_GETLINK's answers, each a struct
// ifinfomsg (16 bytes: its index at 4, its flags at 8) and attributes, of which IFLA_IFNAME and
// IFLA_LINKINFO's IFLA_INFO_KIND.
func readLinks(c *netlink.Conn) (map[uint32]Link, error) {
	msgs, err := dump(c, unix.RTM_GETLINK, unix.RTM_NEWLINK, make([]byte, unix.SizeofIfInfomsg))
	if err != nil {
		return nil, fmt.Errorf("listing the node's interfaces: %w", err)
	}
	links := make(map[uint32]Link, len(msgs))
	for _, m := range msgs {
		if len(m.Data) < unix.SizeofIfInfomsg {
			continue
		}
		index := binary.NativeEndian.Uint32(m.Data[4:8])
		l := Link{Loopback: binary.NativeEndian.Uint32(m.Data[8:12])&unix.IFF_LOOPBACK != 0}
		ad, err := netlink.NewAttributeDecoder(m.Data[unix.SizeofIfInfomsg:])
		if err != nil {
			return nil, fmt.Errorf("reading interface %d: %w", index, err)
		}
		for ad.Next() {
			switch ad.Type() {
			case unix.IFLA_IFNAME:
				l.Name = ad.String()
			case unix.IFLA_LINKINFO:
				ad.Nested(func(nad *netlink.AttributeDecoder) error {
					for nad.Next() {
						if nad.Type() == unix.IFLA_INFO_KIND {
							l.Kind = nad.String()
						}
					}
					return nil
				})
			}
		}
		if err := ad.Err(); err != nil {
			return nil, fmt.Errorf("reading interface %d: %w", index, err)
		}
		links[index] = l
	}
	return links, nil
}

// ifAddr is one address of an interface.
type ifAddr struct {
	index uint32
	addr  netip.Addr
}

// readAddrs are the namespace's interface addresses: RTM_GETADDR's answers, each a struct
// ifaddrmsg (8 bytes: the interface's index at 4) and attributes: IFA_LOCAL is the interface's
// own address where there is a peer (IFA_ADDRESS is then the peer's), IFA_ADDRESS otherwise.
func readAddrs(c *netlink.Conn) ([]ifAddr, error) {
	msgs, err := dump(c, unix.RTM_GETADDR, unix.RTM_NEWADDR, make([]byte, unix.SizeofIfAddrmsg))
	if err != nil {
		return nil, fmt.Errorf("listing the node's addresses: %w", err)
	}
	var out []ifAddr
	for _, m := range msgs {
		if len(m.Data) < unix.SizeofIfAddrmsg {
			continue
		}
		a := ifAddr{index: binary.NativeEndian.Uint32(m.Data[4:8])}
		ad, err := netlink.NewAttributeDecoder(m.Data[unix.SizeofIfAddrmsg:])
		if err != nil {
			return nil, fmt.Errorf("reading an address of interface %d: %w", a.index, err)
		}
		var local, address netip.Addr
		for ad.Next() {
			switch ad.Type() {
			case unix.IFA_LOCAL:
				local, _ = netip.AddrFromSlice(ad.Bytes())
			case unix.IFA_ADDRESS:
				address, _ = netip.AddrFromSlice(ad.Bytes())
			}
		}
		if err := ad.Err(); err != nil {
			return nil, fmt.Errorf("reading an address of interface %d: %w", a.index, err)
		}
		if a.addr = local; !a.addr.IsValid() {
			a.addr = address
		}
		if a.addr.IsValid() {
			a.addr = a.addr.Unmap()
			out = append(out, a)
		}
	}
	return out, nil
}
