// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"text/template"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// NetNS holds each local pod's network namespace path, by pod UID: where the node's Envoy puts
// the pod's listeners. The CNI plugin (cmd/cni, issue 13) hands the path over on ADD and takes it
// back on DEL; it is not built yet, so until then nothing but tests calls Record, and
// --netns-path-template (NetNSPathTemplate) stands in for it. A pod with no path gets no
// listeners.
type NetNS struct {
	mu      sync.Mutex
	paths   map[types.UID]string
	changed func()
}

// NewNetNS returns an empty registry.
func NewNetNS() *NetNS { return &NetNS{paths: map[types.UID]string{}} }

// Record sets pod uid's netns path, which must be absolute.
func (n *NetNS) Record(uid types.UID, path string) error {
	if !filepath.IsAbs(path) {
		return fmt.Errorf("the network namespace of pod %s: %q is not an absolute path", uid, path)
	}
	n.mu.Lock()
	changed := n.paths[uid] != path
	n.paths[uid] = path
	notify := n.changed
	n.mu.Unlock()
	if changed && notify != nil {
		notify()
	}
	return nil
}

// Forget drops pod uid's path (the pod's sandbox is gone).
func (n *NetNS) Forget(uid types.UID) {
	n.mu.Lock()
	_, had := n.paths[uid]
	delete(n.paths, uid)
	notify := n.changed
	n.mu.Unlock()
	if had && notify != nil {
		notify()
	}
}

// path is pod uid's recorded path.
func (n *NetNS) path(uid types.UID) (string, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	p, ok := n.paths[uid]
	return p, ok
}

// onChange makes every change call f (the xDS publisher's rebuild trigger; it must not block).
func (n *NetNS) onChange(f func()) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.changed = f
}

// NetNSPathTemplate names a pod's netns path when the CNI plugin has not recorded one: a stand-in
// until that plugin exists, so that `make run` (where pods have no real netns) gets listeners.
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
