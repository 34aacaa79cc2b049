// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"fmt"
	"net/netip"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"golang.org/x/sys/unix"

	"github.com/aether-mesh/aether-operator/internal/capture"
)

// The table as netlink names it.
var table = &nftables.Table{Name: capture.TableName, Family: nftables.TableFamilyINet}

// Registers, as nft allocates them for a concatenation: an address from register 1 (NFT_REG_1,
// 16 bytes), the port in the 32-bit register after it (NFT_REG32_01 after an IPv4 address,
// NFT_REG32_04 = NFT_REG_2 after an IPv6 one).
const (
	reg1         = 1
	regAfterIPv4 = 9
	regAfterIPv6 = 2
)

// Offsets into the headers of what rules match.
const (
	ipv4DaddrOffset = 16
	ipv6DaddrOffset = 24
	tcpDportOffset  = 2
)

// keyTypes are the nftables key types of capture's set types.
var keyTypes = map[capture.SetType]nftables.SetDatatype{
	capture.TypePort:     nftables.TypeInetService,
	capture.TypeIPv4Port: nftables.MustConcatSetType(nftables.TypeIPAddr, nftables.TypeInetService),
	capture.TypeIPv6Port: nftables.MustConcatSetType(nftables.TypeIP6Addr, nftables.TypeInetService),
	capture.TypeIPv4:     nftables.TypeIPAddr,
	capture.TypeIPv6:     nftables.TypeIP6Addr,
}

// concatenated reports whether sets of type typ have concatenated keys (an address and a port).
func concatenated(typ capture.SetType) bool {
	return typ == capture.TypeIPv4Port || typ == capture.TypeIPv6Port
}

// setTypeOf is the capture set type of a set read from the kernel, by its key type's name and
// length and its flags; ok is false for any other set (the table then is not ours to amend).
func setTypeOf(s *nftables.Set) (capture.SetType, bool) {
	for typ, key := range keyTypes {
		concat := concatenated(typ)
		if s.KeyType.Name == key.Name && s.KeyType.Bytes == key.Bytes && s.Concatenation == concat &&
			!s.Anonymous && !s.Constant && !s.Interval && !s.IsMap && !s.HasTimeout && !s.Dynamic {
			return typ, true
		}
	}
	return "", false
}

// nftSet is capture set s as netlink's.
func nftSet(s capture.Set) *nftables.Set {
	return &nftables.Set{Table: table, Name: s.Name, KeyType: keyTypes[s.Type], Concatenation: concatenated(s.Type)}
}

// elementKey is e as its set's key: the address (4 or 16 bytes), then the port in network order,
// padded to 4 bytes in a concatenation; the port alone (2 bytes) or the address alone otherwise.
func elementKey(e capture.Element) []byte {
	port := binaryutil.BigEndian.PutUint16(e.Port)
	if !e.Addr.IsValid() {
		return port
	}
	key := e.Addr.AsSlice()
	if e.Port == 0 {
		return key
	}
	return append(append(key, port...), 0, 0)
}

// elementOf reads a key of a set of type typ back; ok is false for a key of the wrong length.
func elementOf(typ capture.SetType, key []byte) (capture.Element, bool) {
	port := func(b []byte) uint16 { return uint16(b[0])<<8 | uint16(b[1]) }
	switch {
	case typ == capture.TypePort && len(key) == 2:
		return capture.Element{Port: port(key)}, true
	case typ == capture.TypeIPv4Port && len(key) == 8:
		return capture.Element{Addr: netip.AddrFrom4([4]byte(key[:4])), Port: port(key[4:])}, true
	case typ == capture.TypeIPv6Port && len(key) == 20:
		return capture.Element{Addr: netip.AddrFrom16([16]byte(key[:16])), Port: port(key[16:])}, true
	case typ == capture.TypeIPv4 && len(key) == 4:
		return capture.Element{Addr: netip.AddrFrom4([4]byte(key))}, true
	case typ == capture.TypeIPv6 && len(key) == 16:
		return capture.Element{Addr: netip.AddrFrom16([16]byte(key))}, true
	}
	return capture.Element{}, false
}

// nftElements are es as set elements.
func nftElements(es []capture.Element) []nftables.SetElement {
	out := make([]nftables.SetElement, len(es))
	for i, e := range es {
		out[i] = nftables.SetElement{Key: elementKey(e)}
	}
	return out
}

// nftChain is capture chain c as netlink's: a base chain of its type on its hook, policy accept.
func nftChain(c capture.Chain) (*nftables.Chain, error) {
	if c.Type != "nat" || c.Hook != "output" {
		return nil, fmt.Errorf("capture/apply: chain %s is of type %s on hook %s; only nat on output is known", c.Name, c.Type, c.Hook)
	}
	accept := nftables.ChainPolicyAccept
	return &nftables.Chain{Name: c.Name, Table: table, Type: nftables.ChainTypeNAT, Hooknum: nftables.ChainHookOutput,
		Priority: new(nftables.ChainPriority(c.Priority)), Policy: &accept}, nil
}

// sameChain reports whether chain k, read from the kernel, is c's base chain.
func sameChain(k *nftables.Chain, c capture.Chain) bool {
	want, err := nftChain(c)
	return err == nil && k.Type == want.Type && k.Hooknum != nil && *k.Hooknum == *want.Hooknum &&
		k.Priority != nil && *k.Priority == *want.Priority
}

// comment is the userdata that carries a rule's identity: its text.
func comment(r capture.Rule) []byte {
	return userdata.AppendString(nil, userdata.TypeComment, r.String())
}

// commentOf is the identity of a rule read from the kernel; "" when it has none.
func commentOf(r *nftables.Rule) string {
	text, _ := userdata.GetString(r.UserData, userdata.TypeComment)
	return text
}

// nftRule is capture rule r in chain as netlink's: its match's expressions, then its verdict's, and
// its text as comment.
func nftRule(chain *nftables.Chain, r capture.Rule) (*nftables.Rule, error) {
	exprs, err := matchExprs(r.Match)
	if err != nil {
		return nil, err
	}
	switch v := r.Verdict; v.Kind {
	case capture.VerdictReturn:
		exprs = append(exprs, &expr.Verdict{Kind: expr.VerdictReturn})
	case capture.VerdictRedirect:
		exprs = append(exprs,
			&expr.Immediate{Register: reg1, Data: binaryutil.BigEndian.PutUint16(v.Port)},
			&expr.Redir{RegisterProtoMin: reg1, Flags: unix.NF_NAT_RANGE_PROTO_SPECIFIED})
	default:
		return nil, fmt.Errorf("capture/apply: rule %q: verdict %q is none this applier knows", r, v.Kind)
	}
	return &nftables.Rule{Table: table, Chain: chain, Exprs: exprs, UserData: comment(r)}, nil
}

// metaIs matches packets whose meta key (the socket's owner, its mark) is value.
func metaIs(key expr.MetaKey, value uint32) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: key, Register: reg1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: reg1, Data: binaryutil.NativeEndian.PutUint32(value)},
	}
}

// matchExprs are m's expressions, as nft compiles the same text.
func matchExprs(m capture.Match) ([]expr.Any, error) {
	switch m.Kind {
	case capture.MatchDaddr:
		return daddrExprs(m.Prefix), nil
	case capture.MatchOwner:
		return metaIs(expr.MetaKeySKUID, m.UID), nil
	case capture.MatchTCP:
		return isTCP(), nil
	case capture.MatchMark:
		return metaIs(expr.MetaKeyMARK, m.Mark), nil
	case capture.MatchProtoDport:
		proto := byte(unix.IPPROTO_UDP)
		if m.Proto == "tcp" {
			proto = unix.IPPROTO_TCP
		}
		return []expr.Any{
			&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: reg1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: reg1, Data: []byte{proto}},
			&expr.Payload{DestRegister: reg1, Base: expr.PayloadBaseTransportHeader, Offset: tcpDportOffset, Len: 2},
			&expr.Cmp{Op: expr.CmpOpEq, Register: reg1, Data: binaryutil.BigEndian.PutUint16(m.Port)},
		}, nil
	case capture.MatchDaddrSet:
		family, offset, size := byte(unix.NFPROTO_IPV4), uint32(ipv4DaddrOffset), uint32(4)
		if m.IPv6 {
			family, offset, size = unix.NFPROTO_IPV6, ipv6DaddrOffset, 16
		}
		exprs := append(append(isTCP(), isFamily(family)...),
			&expr.Payload{DestRegister: reg1, Base: expr.PayloadBaseNetworkHeader, Offset: offset, Len: size},
			&expr.Lookup{SourceRegister: reg1, SetName: m.Set})
		if m.Ports != "" {
			exprs = append(exprs,
				&expr.Payload{DestRegister: reg1, Base: expr.PayloadBaseTransportHeader, Offset: tcpDportOffset, Len: 2},
				&expr.Lookup{SourceRegister: reg1, SetName: m.Ports})
		}
		return exprs, nil
	case capture.MatchDport:
		return append(isTCP(),
			&expr.Payload{DestRegister: reg1, Base: expr.PayloadBaseTransportHeader, Offset: tcpDportOffset, Len: 2},
			&expr.Lookup{SourceRegister: reg1, SetName: m.Set}), nil
	case capture.MatchDaddrDport:
		family, offset, size, portReg := byte(unix.NFPROTO_IPV4), uint32(ipv4DaddrOffset), uint32(4), uint32(regAfterIPv4)
		if m.IPv6 {
			family, offset, size, portReg = unix.NFPROTO_IPV6, ipv6DaddrOffset, 16, regAfterIPv6
		}
		return append(append(isFamily(family), isTCP()...),
			&expr.Payload{DestRegister: reg1, Base: expr.PayloadBaseNetworkHeader, Offset: offset, Len: size},
			&expr.Payload{DestRegister: portReg, Base: expr.PayloadBaseTransportHeader, Offset: tcpDportOffset, Len: 2},
			&expr.Lookup{SourceRegister: reg1, SetName: m.Set}), nil
	}
	return nil, fmt.Errorf("capture/apply: match %q is none this applier knows", m.Kind)
}

// daddrExprs match a destination prefix: the family, then the address under the prefix's mask.
func daddrExprs(p netip.Prefix) []expr.Any {
	family, offset := byte(unix.NFPROTO_IPV4), uint32(ipv4DaddrOffset)
	if p.Addr().Is6() {
		family, offset = unix.NFPROTO_IPV6, ipv6DaddrOffset
	}
	addr := p.Masked().Addr().AsSlice()
	exprs := append(isFamily(family),
		&expr.Payload{DestRegister: reg1, Base: expr.PayloadBaseNetworkHeader, Offset: offset, Len: uint32(len(addr))})
	if !p.IsSingleIP() {
		exprs = append(exprs, &expr.Bitwise{SourceRegister: reg1, DestRegister: reg1, Len: uint32(len(addr)),
			Mask: maskBytes(p.Bits(), len(addr)), Xor: make([]byte, len(addr))})
	}
	return append(exprs, &expr.Cmp{Op: expr.CmpOpEq, Register: reg1, Data: addr})
}

// maskBytes is a network mask of bits ones in size bytes.
func maskBytes(bits, size int) []byte {
	mask := make([]byte, size)
	for i := range bits {
		mask[i/8] |= 0x80 >> (i % 8)
	}
	return mask
}

// isFamily matches packets of family (NFPROTO_IPV4 or NFPROTO_IPV6).
func isFamily(family byte) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: reg1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: reg1, Data: []byte{family}},
	}
}

// isTCP matches TCP.
func isTCP() []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: reg1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: reg1, Data: []byte{unix.IPPROTO_TCP}},
	}
}
