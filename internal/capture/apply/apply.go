// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/aether-mesh/aether-operator/internal/capture"
)

// Result is the outcome of one Sync or Check, the label of the agent's
// aether_agent_capture_syncs_total.
type Result string

const (
	// Unchanged means the table already held the ruleset; nothing was sent.
	Unchanged Result = "unchanged"
	// Applied means one batch brought the table to the ruleset.
	Applied Result = "applied"
	// Repaired means the table was not what the applier last committed (deleted, flushed or edited by
	// someone else), and one batch brought it back.
	Repaired Result = "repaired"
	// Failed means the namespace could not be read or the batch was refused; the applier reads the
	// table again before its next batch.
	Failed Result = "failed"
)

// Results are every Result, for metrics exported at zero.
func Results() []Result { return []Result{Unchanged, Applied, Repaired, Failed} }

// Report says what one Sync or Check did.
type Report struct {
	Result Result
	// Read is true when the table was read from the kernel: the namespace was new to this
	// applier (adoption), or its ruleset generation had moved since the last commit.
	Read bool
	// Batches is how many netlink batches were sent: 0 or 1.
	Batches int
	// Stats count what the batch changed.
	Stats Stats
}

// Applier programs table inet aether in network namespaces (DESIGN section 8) and keeps, per
// namespace, what it last committed, so that a change sends one batch holding only the
// difference (kube-proxy's nftables partial sync) and an unchanged ruleset sends nothing:
//
//   - the first Sync of a namespace adopts its table: it reads it once and sends only what
//     differs, so a new applier (an agent restart) never leaves a namespace without rules, and
//     rules stay while no applier runs;
//   - every Sync and Check first reads the namespace's ruleset generation, which the kernel moves
//     on every commit: unchanged since the applier's own last commit, the table is what it
//     committed (a cheap check: one small netlink message); moved, the table is read again and
//     repaired (deleted, flushed or edited by hand);
//   - a table holding what capture never makes (a set of another type, a chain on another hook)
//     is replaced whole, in the same one batch (the kernel applies a batch atomically).
//
// Its methods may be called from several goroutines; they run one at a time.
type Applier struct {
	mu         sync.Mutex
	namespaces map[string]*nsState
}

// nsState is what the applier knows of one namespace.
type nsState struct {
	// want is the ruleset last asked for.
	want capture.Ruleset
	// committed is what the table holds (as last committed or read); nil when unknown.
	committed *tableState
	// gen is the namespace's ruleset generation right after the last commit or read; known
	// tells whether it was read, and the applier's own commit was the only one in between.
	gen   uint32
	known bool
}

// New returns an applier that knows no namespace.
func New() *Applier { return &Applier{namespaces: map[string]*nsState{}} }

// Sync makes the table of the network namespace at path hold want: nothing when it does (one
// generation read), else one batch of the difference.
func (a *Applier) Sync(path string, want capture.Ruleset) (Report, error) {
	if err := want.Validate(); err != nil {
		return Report{Result: Failed}, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	st, ok := a.namespaces[path]
	if !ok {
		st = &nsState{}
		a.namespaces[path] = st
	}
	st.want = want
	return st.syncAt(path)
}

// Check is the periodic cheap check of the namespace at path: when its ruleset generation is
// the one after the applier's last commit, nothing; else (the table was touched by someone else,
// or the last Sync failed) its table is read and brought back to the last ruleset Sync was given.
// A namespace Sync was never given is an error.
func (a *Applier) Check(path string) (Report, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	st, ok := a.namespaces[path]
	if !ok {
		return Report{Result: Failed}, fmt.Errorf("capture/apply: network namespace %s was never synced", path)
	}
	return st.syncAt(path)
}

// syncAt brings the table of the namespace at path to st.want. A namespace it cannot reach keeps
// nothing committed: the next sync there writes the whole ruleset.
func (st *nsState) syncAt(path string) (Report, error) {
	c, err := dial(path)
	if err != nil {
		st.committed = nil
		return Report{Result: Failed}, err
	}
	defer c.close()
	return st.sync(c)
}

// Forget drops what the applier knows of the namespace at path (its pod is gone: CNI DEL); the
// table stays with the namespace.
func (a *Applier) Forget(path string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.namespaces, path)
}

// Remove deletes the table from the namespace at path (its pod left the mesh) and forgets it. A
// namespace or table already gone is no error.
func (a *Applier) Remove(path string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.namespaces, path)
	_, err := RemoveTable(path)
	return err
}

// RemoveTable deletes table inet aether, and only it, from the network namespace at path, and
// reports whether there was one: a namespace or table already gone is no error (false). Tables
// of other owners in the namespace are left as they are. For an applier that knows the namespace,
// Applier.Remove; this is for the agent's uninstall, when no applier runs.
func RemoveTable(path string) (bool, error) {
	c, err := dial(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	defer c.close()
	c.nft.DelTable(table)
	if err := c.nft.Flush(); errors.Is(err, unix.ENOENT) {
		return false, nil
	} else if err != nil {
		return false, fmt.Errorf("deleting table %s %s in %s: %w", capture.TableFamily, capture.TableName, path, err)
	}
	return true, nil
}

// Namespaces are the paths of the namespaces the applier knows, sorted.
func (a *Applier) Namespaces() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]string, 0, len(a.namespaces))
	for path := range a.namespaces {
		out = append(out, path)
	}
	slices.Sort(out)
	return out
}

// sync brings the table to st.want over c.
func (st *nsState) sync(c *nsConn) (Report, error) {
	gen, err := c.generation()
	if err != nil {
		st.committed = nil
		return Report{Result: Failed}, err
	}
	var rep Report
	have, drift := st.committed, false
	if have == nil || !st.known || gen != st.gen {
		read, err := c.read()
		if err != nil {
			st.committed = nil
			return Report{Result: Failed, Read: true}, err
		}
		drift = have != nil && !read.equal(have)
		have, rep.Read = read, true
	}
	b := plan(have, st.want)
	if b.empty() {
		st.committed, st.gen, st.known = have, gen, true
		rep.Result = Unchanged
		return rep, nil
	}
	committed, err := commit(c, b, have, st.want)
	if err != nil {
		st.committed = nil
		return Report{Result: Failed, Read: rep.Read}, err
	}
	rep.Batches, rep.Stats = 1, b.stats()
	after, err := c.generation()
	st.committed, st.gen, st.known = committed, after, err == nil && after == gen+1 && committed != nil
	rep.Result = Applied
	if drift {
		rep.Result = Repaired
	}
	return rep, nil
}

// commit sends b as one batch and returns what the table then holds: want's, with the handles of
// the rules it kept from have and, listed again, of the rules it added (nil when that listing
// fails or disagrees: the table is read again next time).
func commit(c *nsConn, b *batch, have *tableState, want capture.Ruleset) (*tableState, error) {
	if err := c.sendBuffer(batchSize(b)); err != nil {
		return nil, fmt.Errorf("sizing the netlink send buffer: %w", err)
	}
	if err := write(c.nft, b); err != nil {
		return nil, err
	}
	if err := c.nft.Flush(); err != nil {
		return nil, fmt.Errorf("committing table %s %s: %w", capture.TableFamily, capture.TableName, err)
	}
	committed := stateOf(want, have)
	for _, name := range b.rulesChanged {
		listed, err := c.readRules(name)
		i := slices.IndexFunc(committed.chains, func(ch chainState) bool { return ch.name == name })
		if err != nil || !slices.EqualFunc(listed, committed.chains[i].rules, func(a, b ruleState) bool { return a.key == b.key }) {
			return nil, nil
		}
		committed.chains[i].rules = listed
	}
	return committed, nil
}
