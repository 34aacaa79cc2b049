// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package meshdns

import (
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// MaxCacheTTL bounds how long a forwarded answer is served from the cache, whatever its TTL.
const MaxCacheTTL = 300 * time.Second

// cache holds forwarded answers of one pod while their TTLs last, at most size of them: when
// full, an expired entry goes, else any one (a bound on memory, not a policy of what to keep).
type cache struct {
	size int
	mu   sync.Mutex
	m    map[string]cacheEntry
}

type cacheEntry struct {
	msg     *dns.Msg
	stored  time.Time
	expires time.Time
}

func newCache(size int) *cache { return &cache{size: size, m: map[string]cacheEntry{}} }

// cacheKey is what an answer depends on: the resolver, the question and the flags that change an
// answer (DNSSEC OK, checking disabled). Empty: not a query the cache serves.
func cacheKey(dst string, q *dns.Msg) string {
	if len(q.Question) != 1 || q.Opcode != dns.OpcodeQuery || q.Response {
		return ""
	}
	question := q.Question[0]
	do := false
	if o := q.IsEdns0(); o != nil {
		do = o.Do()
	}
	return dst + "|" + strings.ToLower(question.Name) + "|" + strconv.Itoa(int(question.Qtype)) + "|" +
		strconv.Itoa(int(question.Qclass)) + "|" + strconv.FormatBool(do) + strconv.FormatBool(q.CheckingDisabled) +
		strconv.FormatBool(q.RecursionDesired)
}

// get is the cached answer to q, as q's reply (its ID and question, TTLs less the time spent in
// the cache), packed; nil when none, or when it exceeds limit bytes.
func (c *cache) get(key string, q *dns.Msg, now time.Time, limit int) []byte {
	if c == nil || key == "" {
		return nil
	}
	c.mu.Lock()
	e, ok := c.m[key]
	if ok && !now.Before(e.expires) {
		delete(c.m, key)
		ok = false
	}
	c.mu.Unlock()
	if !ok {
		return nil
	}
	reply := e.msg.Copy()
	reply.Id = q.Id
	reply.Question = q.Question
	age := uint32(now.Sub(e.stored) / time.Second)
	for _, section := range [][]dns.RR{reply.Answer, reply.Ns, reply.Extra} {
		for _, rr := range section {
			if h := rr.Header(); h.Rrtype != dns.TypeOPT {
				h.Ttl -= min(age, h.Ttl)
			}
		}
	}
	packed, err := reply.Pack()
	if err != nil || len(packed) > limit {
		return nil
	}
	return packed
}

// put keeps answer (a reply to q, unpacked) for its TTL: the least of its records' (a negative
// answer's SOA: its TTL and minimum), at most MaxCacheTTL. Truncated answers, failures and answers
// without records are not kept.
func (c *cache) put(key string, q *dns.Msg, answer []byte, now time.Time) {
	if c == nil || key == "" || c.size <= 0 {
		return
	}
	var m dns.Msg
	if err := m.Unpack(answer); err != nil || m.Id != q.Id || m.Truncated || len(m.Question) != 1 ||
		(m.Rcode != dns.RcodeSuccess && m.Rcode != dns.RcodeNameError) ||
		!strings.EqualFold(m.Question[0].Name, q.Question[0].Name) || m.Question[0].Qtype != q.Question[0].Qtype {
		return
	}
	ttl, records := uint32(MaxCacheTTL/time.Second), false
	for _, section := range [][]dns.RR{m.Answer, m.Ns} {
		for _, rr := range section {
			records = true
			ttl = min(ttl, rr.Header().Ttl)
			if soa, ok := rr.(*dns.SOA); ok {
				ttl = min(ttl, soa.Minttl)
			}
		}
	}
	if !records || ttl == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, had := c.m[key]; !had && len(c.m) >= c.size {
		evicted := false
		for k, e := range c.m {
			if !now.Before(e.expires) {
				delete(c.m, k)
				evicted = true
			}
		}
		if !evicted {
			for k := range c.m {
				delete(c.m, k)
				break
			}
		}
	}
	c.m[key] = cacheEntry{msg: &m, stored: now, expires: now.Add(time.Duration(ttl) * time.Second)}
}

// len is how many answers the cache holds.
func (c *cache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}
