// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"text/template"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/aether-mesh/aether-operator/internal/cni"
	"github.com/aether-mesh/aether-operator/internal/netnsprobe"
)

// NetNS holds each local pod's network namespace path, by pod UID: where the node's Envoy puts
// the pod's listeners and capture programs its rules. The CNI plugin (cmd/cni) hands the path over
// on ADD (CNIServer: RecordSandbox) and takes it back on DEL (ForgetSandbox);
// --netns-path-template (NetNSPathTemplate) stands in where no plugin runs (make run). A pod with
// no path gets no listeners.
//
// With a state file (OpenNetNS) the registry outlives the agent: every change is written to the
// file, and an agent that starts reads it back, so a restart does not lose the pods that were
// handed over before it (the file lives in the agent's run directory on the host, a tmpfs: it goes
// with a reboot, as the namespaces do).
//
// A pod whose sandbox is deleted (DrainSandbox, CNI DEL) is forgotten at once, as every reader of
// the recorded paths sees it, but its drain tail runs on: for that long its namespace stays pinned
// and the xDS publisher keeps the pod's listeners, so that connections still finishing through
// them are not cut with the sandbox. The tails are not in the state file: a restarted
// agent has neither the pins (the old process's descriptors) nor the pods' last listeners to keep.
type NetNS struct {
	mu      sync.Mutex
	pods    map[types.UID]netnsEntry
	tails   map[types.UID]*drainTail
	changed func()
	file    string // the state file; empty: in memory only
}

// DefaultNetNSDrainTail is CNIOptions.DrainTail's default (--netns-drain-tail), the design's
// tail: a connection through a deleted pod's listeners has this long, then the node Envoy's drain
// time (20 s in config/envoy) once the tail's end withdraws them.
const DefaultNetNSDrainTail = 60 * time.Second

// drainTail is one deleted sandbox's tail: its entry, the socket that pins its
// namespace (nil when the path could no longer be opened) and the timer that ends it.
type drainTail struct {
	entry netnsEntry
	pin   *os.File
	timer *time.Timer
}

// netnsEntry is one pod's namespace and the sandbox that handed it over ("" when recorded by
// Record, without a sandbox).
type netnsEntry struct {
	Path    string `json:"netns"`
	Sandbox string `json:"containerID,omitempty"`
}

// netnsState is the state file's content.
type netnsState struct {
	Pods map[types.UID]netnsEntry `json:"pods"`
}

// NewNetNS returns an empty registry, in memory only.
func NewNetNS() *NetNS {
	return &NetNS{pods: map[types.UID]netnsEntry{}, tails: map[types.UID]*drainTail{}}
}

// OpenNetNS returns the registry kept in file, with what the file holds (none if it does not
// exist yet), but for the pods whose namespace no longer exists (their sandbox was deleted while
// no agent ran): those are dropped, and listed in dropped.
func OpenNetNS(file string) (n *NetNS, dropped []string, err error) {
	n = &NetNS{pods: map[types.UID]netnsEntry{}, tails: map[types.UID]*drainTail{}, file: file}
	data, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return n, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("reading the network namespace registry: %w", err)
	}
	var state netnsState
	if err := json.Unmarshal(data, &state); err != nil {
		return nil, nil, fmt.Errorf("the network namespace registry %s does not parse (%w): remove it, and recreate the node's meshed pods", file, err)
	}
	for uid, e := range state.Pods {
		if _, err := os.Stat(e.Path); err != nil || !filepath.IsAbs(e.Path) {
			dropped = append(dropped, fmt.Sprintf("%s (%s)", uid, e.Path))
			continue
		}
		n.pods[uid] = e
	}
	slices.Sort(dropped)
	if len(dropped) > 0 {
		n.mu.Lock()
		err = n.save()
		n.mu.Unlock()
	}
	return n, dropped, err
}

// Record sets pod uid's netns path, which must be absolute.
func (n *NetNS) Record(uid types.UID, path string) error { return n.RecordSandbox(uid, "", path) }

// RecordSandbox sets pod uid's netns path, handed over by sandbox (the CNI container ID). A drain
// tail of the pod's earlier sandbox ends at once: the pod's listeners move to the new namespace
// (they have the same names), and the old ones drain in Envoy as any replaced listener does.
func (n *NetNS) RecordSandbox(uid types.UID, sandbox, path string) error {
	if !filepath.IsAbs(path) {
		return fmt.Errorf("the network namespace of pod %s: %q is not an absolute path", uid, path)
	}
	entry := netnsEntry{Path: path, Sandbox: sandbox}
	n.mu.Lock()
	ended := n.endTail(uid)
	changed := n.pods[uid] != entry
	n.pods[uid] = entry
	var err error
	if changed {
		err = n.save()
	}
	notify := n.changed
	n.mu.Unlock()
	if (changed || ended) && notify != nil {
		notify()
	}
	return err
}

// Forget drops pod uid's path (the pod's sandbox is gone), with no drain tail.
func (n *NetNS) Forget(uid types.UID) {
	n.forget(0, func() (types.UID, bool) { _, had := n.pods[uid]; return uid, had })
}

// ForgetSandbox drops the pod whose path sandbox handed over: pod uid's, or, when uid is empty,
// whichever pod's it was. A path recorded by another sandbox stays (a pod's replaced sandbox may
// be deleted after its new one was added); one recorded without a sandbox goes. It reports the
// pod it forgot, if any. No drain tail: DrainSandbox is CNI DEL's.
func (n *NetNS) ForgetSandbox(uid types.UID, sandbox string) (types.UID, bool) {
	return n.DrainSandbox(uid, sandbox, 0)
}

// DrainSandbox is ForgetSandbox, the forgotten pod's drain tail running for tail (none when tail
// is not positive): its namespace pinned by a socket made in it (netnsprobe.Pin), so that it
// outlives the runtime's removal of the sandbox's bind mount, which the pin does not block,
// and the pod listed by draining until the tail ends, when the pin is closed and the change told
// (the publisher's rebuild then withdraws the pod's listeners).
func (n *NetNS) DrainSandbox(uid types.UID, sandbox string, tail time.Duration) (types.UID, bool) {
	return n.forget(tail, func() (types.UID, bool) {
		if uid != "" {
			e, had := n.pods[uid]
			return uid, had && (e.Sandbox == "" || e.Sandbox == sandbox)
		}
		for u, e := range n.pods {
			if e.Sandbox == sandbox {
				return u, true
			}
		}
		return "", false
	})
}

// forget drops the pod pick names (called with the lock held), if pick says so, and starts its
// drain tail when tail is positive. A failed write of the state file is not the caller's to
// handle: the next change writes the whole state again.
func (n *NetNS) forget(tail time.Duration, pick func() (types.UID, bool)) (types.UID, bool) {
	n.mu.Lock()
	uid, drop := pick()
	if drop {
		if tail > 0 {
			n.startTail(uid, n.pods[uid], tail)
		}
		delete(n.pods, uid)
		_ = n.save()
	}
	notify := n.changed
	n.mu.Unlock()
	if drop && notify != nil {
		notify()
	}
	return uid, drop
}

// startTail starts pod uid's drain tail of entry (called with the lock held). A namespace that
// can no longer be opened (the runtime removed it before DEL) is not pinned: the tail still
// keeps the pod's listeners, whose sockets hold the namespace themselves.
func (n *NetNS) startTail(uid types.UID, entry netnsEntry, tail time.Duration) {
	n.endTail(uid)
	t := &drainTail{entry: entry}
	if pin, err := netnsprobe.Pin(entry.Path); err == nil {
		t.pin = pin
	}
	t.timer = time.AfterFunc(tail, func() {
		n.mu.Lock()
		ended := n.tails[uid] == t && n.endTail(uid)
		notify := n.changed
		n.mu.Unlock()
		if ended && notify != nil {
			notify()
		}
	})
	n.tails[uid] = t
}

// endTail ends pod uid's drain tail, if one runs: its timer stopped, its pin closed (called with
// the lock held). It reports whether one ran.
func (n *NetNS) endTail(uid types.UID) bool {
	t, ok := n.tails[uid]
	if !ok {
		return false
	}
	t.timer.Stop()
	if t.pin != nil {
		_ = t.pin.Close()
	}
	delete(n.tails, uid)
	return true
}

// draining are the pods whose drain tail runs, each with the path its deleted sandbox had: a copy.
func (n *NetNS) draining() map[types.UID]string {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make(map[types.UID]string, len(n.tails))
	for uid, t := range n.tails {
		out[uid] = t.entry.Path
	}
	return out
}

// Sandbox is pod uid's recorded path and the sandbox that handed it over.
func (n *NetNS) Sandbox(uid types.UID) (path, sandbox string, ok bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	e, ok := n.pods[uid]
	return e.Path, e.Sandbox, ok
}

// Paths is every recorded pod's path, by UID: a copy, for a reader that walks them all (capture
// adopting each pod's table when the agent starts).
func (n *NetNS) Paths() map[types.UID]string {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make(map[types.UID]string, len(n.pods))
	for uid, e := range n.pods {
		out[uid] = e.Path
	}
	return out
}

// path is pod uid's recorded path.
func (n *NetNS) path(uid types.UID) (string, bool) {
	p, _, ok := n.Sandbox(uid)
	return p, ok
}

// save writes the registry to its state file, if it has one (called with the lock held).
func (n *NetNS) save() error {
	if n.file == "" {
		return nil
	}
	data, err := json.Marshal(netnsState{Pods: n.pods})
	if err != nil {
		return err
	}
	if err := cni.WriteFileAtomic(n.file, data, 0o600); err != nil {
		return fmt.Errorf("writing the network namespace registry: %w", err)
	}
	return nil
}

// onChange makes every change call f (the xDS publisher's rebuild trigger; it must not block).
func (n *NetNS) onChange(f func()) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.changed = f
}

// NetNSPathTemplate names a pod's netns path when the CNI plugin has not recorded one: a stand-in
// where no plugin runs, so that `make run` (where pods have no real netns) gets listeners.
type NetNSPathTemplate struct {
	text string
	t    *template.Template
}

// netnsTemplateData is what a NetNSPathTemplate reads of a pod.
type netnsTemplateData struct{ Namespace, Name, UID string }

// ParseNetNSPathTemplate reads a Go template of a pod's netns path over .Namespace, .Name and
// .UID, e.g. "/var/run/netns/aether-{{.Namespace}}-{{.Name}}". It must render an absolute path.
// An empty text is no template (nil).
func ParseNetNSPathTemplate(text string) (*NetNSPathTemplate, error) {
	if text == "" {
		return nil, nil
	}
	t, err := template.New("netns").Option("missingkey=error").Parse(text)
	if err != nil {
		return nil, fmt.Errorf("netns path template %q: %w", text, err)
	}
	tmpl := &NetNSPathTemplate{text: text, t: t}
	if _, err := tmpl.render(netnsTemplateData{Namespace: "ns", Name: "pod", UID: "uid"}); err != nil {
		return nil, err
	}
	return tmpl, nil
}

// Path is pod's netns path by the template.
func (t *NetNSPathTemplate) Path(pod *corev1.Pod) (string, error) {
	return t.render(netnsTemplateData{Namespace: pod.Namespace, Name: pod.Name, UID: string(pod.UID)})
}

func (t *NetNSPathTemplate) render(data netnsTemplateData) (string, error) {
	var b strings.Builder
	if err := t.t.Execute(&b, data); err != nil {
		return "", fmt.Errorf("netns path template %q: %w (it may use .Namespace, .Name and .UID)", t.text, err)
	}
	if !filepath.IsAbs(b.String()) {
		return "", fmt.Errorf("netns path template %q renders %q, not an absolute path", t.text, b.String())
	}
	return b.String(), nil
}

// String is the template's text.
func (t *NetNSPathTemplate) String() string { return t.text }
