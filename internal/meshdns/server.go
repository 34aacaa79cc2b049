// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package meshdns

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/mdlayher/netlink"
	"github.com/miekg/dns"
	"golang.org/x/sys/unix"
	"golang.org/x/time/rate"
)

// Port is where the server listens in every meshed pod's namespace, on 127.0.0.1 and [::1]: the
// capture rules' redirect target for DNS.
const Port = 18054

// Outcomes of a query, the values of the agent's metric aether_agent_dns_queries_total{outcome}.
const (
	// OutcomeMesh: a mesh name answered from the Table (its VIPs, or an empty answer).
	OutcomeMesh = "mesh"
	// OutcomeNXDomain: a name under the mesh domain that is no service's.
	OutcomeNXDomain = "nxdomain"
	// OutcomeForwarded: forwarded to the pod's resolver and its answer returned (or a cached one).
	OutcomeForwarded = "forwarded"
	// OutcomeUpstreamFailure: the pod's resolver did not answer (or its address could not be
	// read): SERVFAIL.
	OutcomeUpstreamFailure = "upstream_failure"
	// OutcomeRefused: over the pod's rate, or a query sent to the server's own address (which it
	// would forward to itself): REFUSED.
	OutcomeRefused = "refused"
)

// Outcomes lists every outcome, for a metric exported at zero.
func Outcomes() []string {
	return []string{OutcomeMesh, OutcomeNXDomain, OutcomeForwarded, OutcomeUpstreamFailure, OutcomeRefused}
}

// Defaults of Config.
const (
	DefaultRate            = 500
	DefaultBurst           = 1000
	DefaultCacheSize       = 512
	DefaultUpstreamTimeout = 3 * time.Second
	// tcpIdle is how long a client's TCP connection may stay idle between queries.
	tcpIdle = 10 * time.Second
	// maxInFlight bounds one pod's queries in progress (each holds a goroutine and a buffer).
	maxInFlight = 256
	// maxTCPConns bounds the TCP connections one pod's server holds at once (a resolver opens one,
	// or a few for answers truncated over UDP); one past it is closed as it comes, so a pod cannot
	// make its server, and the agent, hold a goroutine and a buffer per connection it opens.
	maxTCPConns = 64
	// spareSockets is how many fresh upstream sockets each pod's server keeps ready.
	spareSockets = 8
)

// Config is what every pod's server shares.
type Config struct {
	// Table answers the mesh names.
	Table *Table
	// Mark is set (SO_MARK) on every socket the server opens towards a resolver, in the pod's
	// namespace: the capture rules return it first (model.ProxySocketMark), so a forwarded query
	// is not redirected back. 0: none.
	Mark uint32
	// Rate and Burst are each pod's token bucket, in queries per second; DefaultRate and
	// DefaultBurst if zero.
	Rate  float64
	Burst int
	// CacheSize bounds each pod's cache of forwarded answers; DefaultCacheSize if zero, none if
	// negative.
	CacheSize int
	// UpstreamTimeout bounds one forwarded exchange; DefaultUpstreamTimeout if zero.
	UpstreamTimeout time.Duration
	// Observe, if set, is told each query's outcome and how long it took to answer, before the
	// reply is written: whoever has the reply can read it counted (a scraper never sees an
	// answered query uncounted, nor a test that asked).
	Observe func(outcome string, took time.Duration)
}

// exchanger sends a query to a resolver and returns its answer: in the pod's namespace (Server),
// or as a test needs.
type exchanger interface {
	exchange(ctx context.Context, query []byte, dst netip.AddrPort, tcp bool) ([]byte, error)
}

// handler is the query path of one pod: rate, mesh names, cache, forwarding.
type handler struct {
	cfg     Config
	limiter *rate.Limiter
	cache   *cache
	up      exchanger
}

func newHandler(cfg Config, up exchanger) *handler {
	h := &handler{cfg: cfg, up: up,
		limiter: rate.NewLimiter(rate.Limit(cmp.Or(cfg.Rate, DefaultRate)), cmp.Or(cfg.Burst, DefaultBurst))}
	if size := cmp.Or(cfg.CacheSize, DefaultCacheSize); size > 0 {
		h.cache = newCache(size)
	}
	return h
}

// answer is the reply to query (nil: none, the packet is dropped) and its outcome. dst reads
// the query's original destination, tcp says how it came (and must be answered).
func (h *handler) answer(ctx context.Context, query []byte, tcp bool, dst func() (netip.AddrPort, error)) ([]byte, string) {
	if !h.limiter.Allow() {
		return failure(query, dns.RcodeRefused), OutcomeRefused
	}
	q := new(dns.Msg)
	if err := q.Unpack(query); err != nil || q.Response || q.Opcode != dns.OpcodeQuery || len(q.Question) != 1 {
		// Not a query this server answers: the resolver gets it as the pod sent it.
		return h.forward(ctx, query, nil, tcp, dst)
	}
	question := q.Question[0]
	kind, addrs := h.cfg.Table.Lookup(question.Name)
	switch kind {
	case Service:
		return meshReply(h.cfg.Table.Domain(), q, addrs, dns.RcodeSuccess, tcp), OutcomeMesh
	case Empty:
		return meshReply(h.cfg.Table.Domain(), q, nil, dns.RcodeSuccess, tcp), OutcomeMesh
	case NoSuchName:
		return meshReply(h.cfg.Table.Domain(), q, nil, dns.RcodeNameError, tcp), OutcomeNXDomain
	}
	return h.forward(ctx, query, q, tcp, dst)
}

// forward sends query to its original destination and returns the answer unchanged; q is the
// query parsed (nil if it does not parse: never cached).
func (h *handler) forward(ctx context.Context, query []byte, q *dns.Msg, tcp bool, dst func() (netip.AddrPort, error)) ([]byte, string) {
	to, err := dst()
	if err != nil {
		return failure(query, dns.RcodeServerFailure), OutcomeUpstreamFailure
	}
	if isSelf(to) {
		// Sent to the server itself (127.0.0.1:18054 dialled directly, no redirect): forwarded,
		// it would come back here, again and again.
		return failure(query, dns.RcodeRefused), OutcomeRefused
	}
	key := ""
	if q != nil {
		key = cacheKey(to.String(), q)
		limit := dns.MaxMsgSize
		if !tcp {
			limit = udpLimit(q)
		}
		if cached := h.cache.get(key, q, time.Now(), limit); cached != nil {
			return cached, OutcomeForwarded
		}
	}
	ctx, cancel := context.WithTimeout(ctx, cmp.Or(h.cfg.UpstreamTimeout, DefaultUpstreamTimeout))
	defer cancel()
	answer, err := h.up.exchange(ctx, query, to, tcp)
	if err != nil {
		return failure(query, dns.RcodeServerFailure), OutcomeUpstreamFailure
	}
	if q != nil {
		h.cache.put(key, q, answer, time.Now())
	}
	return answer, OutcomeForwarded
}

// isSelf reports whether to is where the server itself listens: loopback, its port.
func isSelf(to netip.AddrPort) bool { return to.Port() == Port && to.Addr().Unmap().IsLoopback() }

// udpLimit is the largest answer q's sender takes over UDP: its EDNS0 buffer size, or 512.
func udpLimit(q *dns.Msg) int {
	if o := q.IsEdns0(); o != nil {
		return max(int(o.UDPSize()), dns.MinMsgSize)
	}
	return dns.MinMsgSize
}

// meshReply is the authoritative reply to q from the mesh: addrs of q's type (A: IPv4, AAAA:
// IPv6) with TTL MeshTTL, or, when none, the mesh domain's SOA (the negative answer's TTL).
func meshReply(domain string, q *dns.Msg, addrs []netip.Addr, rcode int, tcp bool) []byte {
	m := new(dns.Msg)
	m.SetRcode(q, rcode)
	m.Authoritative, m.RecursionAvailable = true, true
	question := q.Question[0]
	if question.Qclass == dns.ClassINET || question.Qclass == dns.ClassANY {
		for _, a := range addrs {
			hdr := dns.RR_Header{Name: question.Name, Class: dns.ClassINET, Ttl: MeshTTL}
			switch {
			case a.Is4() && (question.Qtype == dns.TypeA || question.Qtype == dns.TypeANY):
				hdr.Rrtype = dns.TypeA
				m.Answer = append(m.Answer, &dns.A{Hdr: hdr, A: a.AsSlice()})
			case a.Is6() && (question.Qtype == dns.TypeAAAA || question.Qtype == dns.TypeANY):
				hdr.Rrtype = dns.TypeAAAA
				m.Answer = append(m.Answer, &dns.AAAA{Hdr: hdr, AAAA: a.AsSlice()})
			}
		}
	}
	if len(m.Answer) == 0 {
		m.Ns = []dns.RR{soa(domain)}
	}
	if o := q.IsEdns0(); o != nil {
		m.SetEdns0(dns.DefaultMsgSize, o.Do())
	}
	if !tcp {
		m.Truncate(udpLimit(q))
	}
	packed, err := m.Pack()
	if err != nil {
		return failure(nil, dns.RcodeServerFailure)
	}
	return packed
}

// soa is the mesh domain's SOA record, for a negative answer: its TTL and minimum, MeshTTL, are
// how long a resolver may cache the negative answer (RFC 2308).
func soa(domain string) dns.RR {
	return &dns.SOA{Hdr: dns.RR_Header{Name: domain, Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: MeshTTL},
		Ns: "ns.dns." + domain, Mbox: "hostmaster." + domain, Serial: 1, Refresh: MeshTTL, Retry: MeshTTL, Expire: MeshTTL, Minttl: MeshTTL}
}

// failure is a header-only reply to query with rcode: its ID, question count 0; nil when query
// is shorter than a header (nothing to answer).
func failure(query []byte, rcode int) []byte {
	if len(query) < 12 {
		return nil
	}
	out := make([]byte, 12)
	copy(out, query[:2])             // ID
	out[2] = 0x80 | query[2]&0x79    // QR; the opcode and RD as asked; not AA, not TC
	out[3] = 0x80 | byte(rcode&0x0f) // RA; the rcode
	return out
}

// Server is the mesh DNS of one pod: its sockets on Port in the pod's namespace, the conntrack
// socket that reads each query's original destination, and the handler.
type Server struct {
	h      *handler
	thread *nsThread
	ct     *netlink.Conn
	udp    []*net.UDPConn
	tcp    []net.Listener
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// spare are fresh UDP sockets for IPv4 queries, opened in the namespace ahead of need (a new
	// socket, so a new source port, per forwarded query, without a trip to the namespace's thread
	// on the query's path).
	spare chan *net.UDPConn
	// tcpConns holds a token per TCP connection served (maxTCPConns at most).
	tcpConns chan struct{}
}

// Serve starts the mesh DNS in the network namespace at netns: it listens on 127.0.0.1:Port and,
// where the namespace has IPv6, [::1]:Port, UDP and TCP, and serves until Close.
func Serve(netns string, cfg Config) (*Server, error) {
	thread, err := enterNS(netns)
	if err != nil {
		return nil, err
	}
	s := &Server{thread: thread, spare: make(chan *net.UDPConn, spareSockets), tcpConns: make(chan struct{}, maxTCPConns)}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.h = newHandler(cfg, s)
	var openErr error
	thread.do(func() {
		if s.ct, openErr = netlink.Dial(unix.NETLINK_NETFILTER, nil); openErr != nil {
			openErr = fmt.Errorf("opening a connection tracking socket: %w", openErr)
			return
		}
		for _, host := range []string{"127.0.0.1", "::1"} {
			addr := net.JoinHostPort(host, strconv.Itoa(Port))
			u, err := net.ListenPacket("udp", addr)
			if err != nil {
				if host == "::1" && noIPv6(err) {
					return // the namespace has no IPv6: its resolver cannot address one either
				}
				openErr = fmt.Errorf("listening on udp %s: %w", addr, err)
				return
			}
			s.udp = append(s.udp, u.(*net.UDPConn))
			l, err := net.Listen("tcp", addr)
			if err != nil {
				openErr = fmt.Errorf("listening on tcp %s: %w", addr, err)
				return
			}
			s.tcp = append(s.tcp, l)
		}
	})
	if openErr != nil {
		s.Close()
		return nil, fmt.Errorf("mesh DNS in %s: %w", netns, openErr)
	}
	for _, u := range s.udp {
		s.wg.Go(func() { s.serveUDP(u) })
	}
	s.wg.Go(s.refill)
	for _, l := range s.tcp {
		s.wg.Go(func() { s.serveTCP(l) })
	}
	return s, nil
}

// noIPv6 reports whether err says the namespace has no IPv6 (no ::1, or no IPv6 at all).
func noIPv6(err error) bool {
	return errors.Is(err, unix.EADDRNOTAVAIL) || errors.Is(err, unix.EAFNOSUPPORT)
}

// Close stops serving and closes every socket; it returns when the server's goroutines have.
func (s *Server) Close() {
	s.cancel()
	for _, u := range s.udp {
		u.Close()
	}
	for _, l := range s.tcp {
		l.Close()
	}
	s.wg.Wait()
	close(s.spare)
	for u := range s.spare {
		u.Close()
	}
	if s.ct != nil {
		s.ct.Close()
	}
	s.thread.close()
}

// observe tells the Config's observer.
func (s *Server) observe(outcome string, start time.Time) {
	if s.h.cfg.Observe != nil {
		s.h.cfg.Observe(outcome, time.Since(start))
	}
}

func (s *Server) serveUDP(u *net.UDPConn) {
	local := netip.MustParseAddrPort(u.LocalAddr().String())
	inFlight := make(chan struct{}, maxInFlight)
	buf := make([]byte, dns.MaxMsgSize)
	for {
		n, peer, err := u.ReadFromUDPAddrPort(buf)
		if err != nil {
			if s.ctx.Err() != nil {
				return
			}
			continue
		}
		start := time.Now()
		query := append([]byte(nil), buf[:n]...)
		select {
		case inFlight <- struct{}{}:
		default:
			s.observe(OutcomeRefused, start) // before the reply: see Config.Observe
			if reply := failure(query, dns.RcodeRefused); reply != nil {
				_, _ = u.WriteToUDPAddrPort(reply, peer)
			}
			continue
		}
		s.wg.Go(func() {
			defer func() { <-inFlight }()
			reply, outcome := s.h.answer(s.ctx, query, false, func() (netip.AddrPort, error) {
				return origDst(s.ct, unix.IPPROTO_UDP, local, peer)
			})
			s.observe(outcome, start) // before the reply: see Config.Observe
			if reply != nil {
				_, _ = u.WriteToUDPAddrPort(reply, peer)
			}
		})
	}
}

func (s *Server) serveTCP(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			if s.ctx.Err() != nil {
				return
			}
			continue
		}
		select {
		case s.tcpConns <- struct{}{}:
			s.wg.Go(func() {
				defer func() { <-s.tcpConns }()
				s.serveConn(c.(*net.TCPConn))
			})
		default:
			_ = c.Close() // at maxTCPConns: the pod's resolver retries, or falls back to UDP
		}
	}
}

// HeldTCPConns is how many TCP connections the server holds now (at most maxTCPConns).
func (s *Server) HeldTCPConns() int { return len(s.tcpConns) }

// serveConn answers the queries of one TCP connection in turn (RFC 7766 framing).
func (s *Server) serveConn(c *net.TCPConn) {
	defer c.Close()
	stop := context.AfterFunc(s.ctx, func() { c.Close() })
	defer stop()
	local := netip.MustParseAddrPort(c.LocalAddr().String())
	peer := netip.MustParseAddrPort(c.RemoteAddr().String())
	var origin netip.AddrPort
	dst := func() (netip.AddrPort, error) {
		if origin.IsValid() {
			return origin, nil
		}
		var err error
		origin, err = origDst(s.ct, unix.IPPROTO_TCP, local, peer)
		return origin, err
	}
	for {
		_ = c.SetDeadline(time.Now().Add(tcpIdle))
		query, err := readFrame(c)
		if err != nil {
			return
		}
		start := time.Now()
		reply, outcome := s.h.answer(s.ctx, query, true, dst)
		s.observe(outcome, start) // before the reply: see Config.Observe
		if reply != nil {
			if err := writeFrame(c, reply); err != nil {
				return
			}
		}
	}
}

// readFrame reads one length-prefixed message. Its buffer grows as the bytes arrive
// (bytes.Buffer.ReadFrom, from 512 bytes), not to the length the prefix announces: a client that
// announces 64 KiB and sends nothing makes the server hold almost nothing.
func readFrame(r io.Reader) ([]byte, error) {
	var size [2]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, err
	}
	var msg bytes.Buffer
	n := int64(binary.BigEndian.Uint16(size[:]))
	if read, err := msg.ReadFrom(io.LimitReader(r, n)); err != nil || read < n {
		return nil, cmp.Or(err, io.ErrUnexpectedEOF)
	}
	return msg.Bytes(), nil
}

func writeFrame(w io.Writer, msg []byte) error {
	_, err := w.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(msg))), msg...))
	return err
}

// refill keeps s.spare full of fresh marked UDP sockets opened in the namespace, until Close.
func (s *Server) refill() {
	for s.ctx.Err() == nil {
		var u *net.UDPConn
		var err error
		s.thread.do(func() {
			var pc net.PacketConn
			if pc, err = s.listenConfig().ListenPacket(s.ctx, "udp4", "0.0.0.0:0"); err == nil {
				u = pc.(*net.UDPConn)
			}
		})
		if err != nil {
			select { // the namespace is going, or out of ports: queries dial their own meanwhile
			case <-s.ctx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		select {
		case s.spare <- u:
		case <-s.ctx.Done():
			u.Close()
		}
	}
}

// listenConfig and dialer open sockets carrying the configured mark.
func (s *Server) listenConfig() *net.ListenConfig { return &net.ListenConfig{Control: s.mark} }

func (s *Server) dialer() *net.Dialer { return &net.Dialer{Control: s.mark} }

func (s *Server) mark(_, _ string, raw syscall.RawConn) error {
	if s.h.cfg.Mark == 0 {
		return nil
	}
	var optErr error
	if err := raw.Control(func(fd uintptr) {
		optErr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_MARK, int(s.h.cfg.Mark))
	}); err != nil {
		return err
	}
	return optErr
}

// exchangeSpare sends an IPv4 UDP query from a spare socket; ok is false when none is ready.
func (s *Server) exchangeSpare(ctx context.Context, query []byte, dst netip.AddrPort) (answer []byte, ok bool, err error) {
	var u *net.UDPConn
	select {
	case u = <-s.spare:
	default:
		return nil, false, nil
	}
	defer u.Close()
	answer, err = readAnswer(ctx, u, query, func(buf []byte) (int, netip.AddrPort, error) {
		return u.ReadFromUDPAddrPort(buf)
	}, func() error { _, err := u.WriteToUDPAddrPort(query, dst); return err }, dst)
	return answer, true, err
}

// readAnswer writes query with write, then reads datagrams until one from dst answers it (its
// ID); others are not ours.
func readAnswer(ctx context.Context, c net.Conn, query []byte, read func([]byte) (int, netip.AddrPort, error), write func() error, dst netip.AddrPort) ([]byte, error) {
	if deadline, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(deadline)
	}
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Now()) })
	defer stop()
	if err := write(); err != nil {
		return nil, err
	}
	bp := buffers.Get().(*[]byte)
	defer buffers.Put(bp)
	buf := *bp
	for {
		n, from, err := read(buf)
		if err != nil {
			return nil, err
		}
		if from.Addr().Unmap() == dst.Addr().Unmap() && from.Port() == dst.Port() && n >= 2 && len(query) >= 2 &&
			buf[0] == query[0] && buf[1] == query[1] {
			return append([]byte(nil), buf[:n]...), nil
		}
	}
}

// buffers hold a UDP answer of any size while it is read: 64 KiB per forwarded query would
// otherwise be garbage the collector chases at every query rate.
var buffers = sync.Pool{New: func() any { b := make([]byte, dns.MaxMsgSize); return &b }}

// exchange forwards query to dst from a new socket in the pod's namespace (a fresh source port
// per query), marked, over UDP or TCP as the pod sent it.
func (s *Server) exchange(ctx context.Context, query []byte, dst netip.AddrPort, tcp bool) ([]byte, error) {
	if !tcp && dst.Addr().Unmap().Is4() {
		if answer, ok, err := s.exchangeSpare(ctx, query, dst); ok {
			return answer, err
		}
	}
	network := "udp"
	if tcp {
		network = "tcp"
	}
	var c net.Conn
	var err error
	s.thread.do(func() { c, err = s.dialer().DialContext(ctx, network, dst.String()) })
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if tcp {
		if deadline, ok := ctx.Deadline(); ok {
			_ = c.SetDeadline(deadline)
		}
		stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Now()) })
		defer stop()
		if err := writeFrame(c, query); err != nil {
			return nil, err
		}
		return readFrame(c)
	}
	// The connected socket takes datagrams from dst only.
	return readAnswer(ctx, c, query, func(buf []byte) (int, netip.AddrPort, error) {
		n, err := c.Read(buf)
		return n, dst, err
	}, func() error { _, err := c.Write(query); return err }, dst)
}
