// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package meshdns

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// Connection tracking's netlink vocabulary (linux/netfilter/nfnetlink_conntrack.h).
const (
	ctnlMsgGet     = unix.NFNL_SUBSYS_CTNETLINK<<8 | 1 // IPCTNL_MSG_CT_GET
	ctaTupleOrig   = 1
	ctaTupleReply  = 2
	ctaTupleIP     = 1
	ctaTupleProto  = 2
	ctaIPv4Src     = 1
	ctaIPv4Dst     = 2
	ctaIPv6Src     = 3
	ctaIPv6Dst     = 4
	ctaProtoNum    = 1
	ctaProtoSrc    = 2
	ctaProtoDst    = 3
	nfnetlinkV0    = 0
	errNoConntrack = "connection tracking has no entry"
)

// origDst reads, from the connection tracking of the namespace conn talks to, where a query that
// arrived at local from peer was addressed before the capture rule redirected it: the entry
// whose reply tuple is (local → peer) holds the original destination in its original tuple.
// proto is unix.IPPROTO_UDP or unix.IPPROTO_TCP.
func origDst(conn *netlink.Conn, proto uint8, local, peer netip.AddrPort) (netip.AddrPort, error) {
	family, src, dst := uint8(unix.AF_INET), uint16(ctaIPv4Src), uint16(ctaIPv4Dst)
	if local.Addr().Is6() && !local.Addr().Is4In6() {
		family, src, dst = unix.AF_INET6, ctaIPv6Src, ctaIPv6Dst
	}
	ae := netlink.NewAttributeEncoder()
	ae.Nested(ctaTupleReply, func(ae *netlink.AttributeEncoder) error {
		ae.Nested(ctaTupleIP, func(ae *netlink.AttributeEncoder) error {
			ae.Bytes(src, local.Addr().Unmap().AsSlice())
			ae.Bytes(dst, peer.Addr().Unmap().AsSlice())
			return nil
		})
		ae.Nested(ctaTupleProto, func(ae *netlink.AttributeEncoder) error {
			ae.Uint8(ctaProtoNum, proto)
			ae.Bytes(ctaProtoSrc, binary.BigEndian.AppendUint16(nil, local.Port()))
			ae.Bytes(ctaProtoDst, binary.BigEndian.AppendUint16(nil, peer.Port()))
			return nil
		})
		return nil
	})
	attrs, err := ae.Encode()
	if err != nil {
		return netip.AddrPort{}, err
	}
	// nfgenmsg: family, version, resource id (big endian).
	data := append([]byte{family, nfnetlinkV0, 0, 0}, attrs...)
	msgs, err := conn.Execute(netlink.Message{
		Header: netlink.Header{Type: netlink.HeaderType(ctnlMsgGet), Flags: netlink.Request | netlink.Acknowledge},
		Data:   data,
	})
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("reading the query's original destination from connection tracking: %w", err)
	}
	for _, m := range msgs {
		if len(m.Data) < 4 {
			continue
		}
		if dst, ok := origTupleDst(m.Data[4:]); ok {
			return dst, nil
		}
	}
	return netip.AddrPort{}, errors.New(errNoConntrack)
}

// origTupleDst is the destination of the original tuple among a conntrack entry's attributes.
func origTupleDst(b []byte) (netip.AddrPort, bool) {
	ad, err := netlink.NewAttributeDecoder(b)
	if err != nil {
		return netip.AddrPort{}, false
	}
	var addr netip.Addr
	var port uint16
	for ad.Next() {
		if ad.Type() != ctaTupleOrig {
			continue
		}
		ad.Nested(func(tuple *netlink.AttributeDecoder) error {
			for tuple.Next() {
				switch tuple.Type() {
				case ctaTupleIP:
					tuple.Nested(func(ip *netlink.AttributeDecoder) error {
						for ip.Next() {
							if t := ip.Type(); t == ctaIPv4Dst || t == ctaIPv6Dst {
								addr, _ = netip.AddrFromSlice(ip.Bytes())
							}
						}
						return nil
					})
				case ctaTupleProto:
					tuple.Nested(func(p *netlink.AttributeDecoder) error {
						for p.Next() {
							if p.Type() == ctaProtoDst && len(p.Bytes()) == 2 {
								port = binary.BigEndian.Uint16(p.Bytes())
							}
						}
						return nil
					})
				}
			}
			return nil
		})
	}
	if ad.Err() != nil || !addr.IsValid() || port == 0 {
		return netip.AddrPort{}, false
	}
	return netip.AddrPortFrom(addr.Unmap(), port), true
}
