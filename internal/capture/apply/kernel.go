// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/google/nftables"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/aether-mesh/aether-operator/internal/capture"
)

// nsConn is one conversation with the nftables of a network namespace: a lasting nftables
// connection and a raw netfilter socket (for the ruleset's generation), both opened in the
// namespace. Opening a socket in another namespace takes setns(2), hence CAP_SYS_ADMIN; changing
// its ruleset takes CAP_NET_ADMIN in it.
type nsConn struct {
	nft *nftables.Conn
	// sock is nft's socket, kept to size its send buffer for a large batch.
	sock *netlink.Conn
	raw  *netlink.Conn
}

// dial opens both sockets in the network namespace at path (a bind mount the container runtime
// made, /var/run/netns/<name>, or /proc/<pid>/ns/net).
func dial(path string) (*nsConn, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("opening the network namespace %s: %w", path, err)
	}
	defer f.Close()
	fd := int(f.Fd())
	c := &nsConn{}
	c.nft, err = nftables.New(nftables.WithNetNSFd(fd), nftables.AsLasting(),
		nftables.WithSockOptions(func(sock *netlink.Conn) error { c.sock = sock; return nil }))
	if err != nil {
		return nil, fmt.Errorf("opening a netlink socket in the network namespace %s: %w", path, err)
	}
	if c.raw, err = netlink.Dial(unix.NETLINK_NETFILTER, &netlink.Config{NetNS: fd}); err != nil {
		_ = c.nft.CloseLasting()
		return nil, fmt.Errorf("opening a netlink socket in the network namespace %s: %w", path, err)
	}
	return c, nil
}

func (c *nsConn) close() {
	_ = c.nft.CloseLasting()
	_ = c.raw.Close()
}

// generation is the namespace's ruleset generation: the kernel adds one on every commit of any
// table in the namespace, so an unchanged generation means an unchanged ruleset.
func (c *nsConn) generation() (uint32, error) {
	replies, err := c.raw.Execute(netlink.Message{
		Header: netlink.Header{Type: netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8 | unix.NFT_MSG_GETGEN), Flags: netlink.Request},
		Data:   []byte{unix.AF_UNSPEC, unix.NFNETLINK_V0, 0, 0},
	})
	if err != nil {
		return 0, fmt.Errorf("reading the ruleset generation: %w", err)
	}
	for _, m := range replies {
		if len(m.Data) < 4 {
			continue
		}
		ad, err := netlink.NewAttributeDecoder(m.Data[4:])
		if err != nil {
			return 0, fmt.Errorf("reading the ruleset generation: %w", err)
		}
		ad.ByteOrder = binary.BigEndian
		for ad.Next() {
			if ad.Type() == unix.NFTA_GEN_ID {
				return ad.Uint32(), nil
			}
		}
	}
	return 0, errors.New("reading the ruleset generation: the kernel's answer has no NFTA_GEN_ID")
}

// sendBuffer sizes the send buffer for a batch of about size bytes: the kernel refuses a batch
// larger than the buffer (EMSGSIZE), and the default (net.core.wmem_default, 208 KiB) holds
// about 6 500 set elements. SO_SNDBUFFORCE passes net.core.wmem_max with CAP_NET_ADMIN, which
// the applier has; without it, SO_SNDBUF up to that maximum.
func (c *nsConn) sendBuffer(size int) error {
	raw, err := c.sock.SyscallConn()
	if err != nil {
		return err
	}
	var setErr error
	if err := raw.Control(func(fd uintptr) {
		if setErr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, size); setErr != nil {
			setErr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF, size)
		}
	}); err != nil {
		return err
	}
	return setErr
}

// read is the table as the kernel holds it, or nil when there is none. A part it cannot take
// for capture's own (a set of another type, a chain on another hook) makes it foreign.
func (c *nsConn) read() (*tableState, error) {
	if _, err := c.nft.ListTableOfFamily(capture.TableName, nftables.TableFamilyINet); errors.Is(err, unix.ENOENT) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("reading table %s %s: %w", capture.TableFamily, capture.TableName, err)
	}
	st := &tableState{}
	sets, err := c.nft.GetSets(table)
	if err != nil {
		return nil, fmt.Errorf("reading the sets of table %s %s: %w", capture.TableFamily, capture.TableName, err)
	}
	for _, s := range sets {
		set, ok, err := c.readSet(s)
		if err != nil {
			return nil, err
		}
		st.foreign = st.foreign || !ok
		st.sets = append(st.sets, set)
	}
	chains, err := c.nft.ListChainsOfTableFamily(nftables.TableFamilyINet)
	if err != nil {
		return nil, fmt.Errorf("reading the chains of table %s %s: %w", capture.TableFamily, capture.TableName, err)
	}
	for _, ch := range chains {
		if ch.Table.Name != capture.TableName {
			continue
		}
		rules, err := c.readRules(ch.Name)
		if err != nil {
			return nil, err
		}
		st.chains = append(st.chains, chainState{name: ch.Name, kernel: ch, rules: rules})
	}
	slices.SortFunc(st.sets, func(a, b setState) int { return cmp.Compare(a.name, b.name) })
	slices.SortFunc(st.chains, func(a, b chainState) int { return cmp.Compare(a.name, b.name) })
	return st, nil
}

// readSet reads set s and its elements; ok is false for a set capture never makes.
func (c *nsConn) readSet(s *nftables.Set) (setState, bool, error) {
	typ, ok := setTypeOf(s)
	if !ok {
		return setState{name: s.Name}, false, nil
	}
	elements, err := c.nft.GetSetElements(s)
	if err != nil {
		return setState{}, false, fmt.Errorf("reading the elements of set %s: %w", s.Name, err)
	}
	set := setState{name: s.Name, typ: typ, elements: make([]capture.Element, 0, len(elements))}
	for _, e := range elements {
		el, fits := elementOf(typ, e.Key)
		if !fits {
			return setState{name: s.Name}, false, nil
		}
		set.elements = append(set.elements, el)
	}
	slices.SortFunc(set.elements, compareElements)
	set.elements = slices.Compact(set.elements)
	return set, true, nil
}

// readRules lists the rules of chain name, in order, each known by its comment.
func (c *nsConn) readRules(name string) ([]ruleState, error) {
	rules, err := c.nft.GetRules(table, &nftables.Chain{Name: name, Table: table})
	if err != nil {
		return nil, fmt.Errorf("reading the rules of chain %s: %w", name, err)
	}
	out := make([]ruleState, len(rules))
	for i, r := range rules {
		out[i] = ruleState{key: commentOf(r), handle: r.Handle}
	}
	return out, nil
}

func compareElements(a, b capture.Element) int {
	return cmp.Or(a.Addr.Compare(b.Addr), cmp.Compare(a.Port, b.Port))
}
