// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/capture"
	"github.com/aether-mesh/aether-operator/internal/capture/apply"
	"github.com/aether-mesh/aether-operator/internal/conditions"
	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/nodeaddrs"
	"github.com/aether-mesh/aether-operator/internal/portspec"
	"github.com/aether-mesh/aether-operator/internal/registration"
	"github.com/aether-mesh/aether-operator/internal/workloadidentity"
)

// DefaultCaptureResync is CaptureOptions.Resync's default (--capture-resync).
const DefaultCaptureResync = 30 * time.Second

// Reasons and action of the capture's Events.
const (
	// ReasonCaptureFailed is the reason of the Warning Event on a pod whose capture could not be
	// programmed or repaired: its note is the error.
	ReasonCaptureFailed = "CaptureFailed"
	// ReasonScopedPortsUncaptured is the reason of the Warning Event on a MeshService with TCP
	// ports that :18082 does not reach while a pod on the node that may call it captures in
	// scoped mode: those ports are not captured there (proposal 037, risk 7).
	ReasonScopedPortsUncaptured = "ScopedPortsUncaptured"
	// ActionCapture is the action of the capture's Events.
	ActionCapture = "Capture"
)

// CaptureOptions turn on capture (DESIGN section 8): the agent programs table inet aether
// (internal/capture) in the network namespace of each meshed pod the CNI plugin handed over
// (the NetNS registry), from the same mesh the xDS publisher builds and after the same debounced
// changes, with internal/capture/apply; and checks every programmed namespace every Resync.
type CaptureOptions struct {
	// Resync is the period of the cheap check of every programmed namespace (its ruleset
	// generation), which repairs a table deleted, flushed or edited by hand; DefaultCaptureResync
	// if zero.
	Resync time.Duration
	// ProxyUID, when set, is the user whose sockets are never captured (capture.Options). Nil
	// for config/envoy's Envoy, which marks its sockets (model.ProxySocketMark) instead.
	ProxyUID *uint32
	// Never are --capture-never's CIDRs, which capture never redirects (capture.Options.Never),
	// beside loopback, link-local and the node's own addresses. Those the capturer keeps current
	// itself (capture.Options.Node): its Node's status.addresses (InternalIP, ExternalIP), from
	// the cache, whose every update rebuilds, and the addresses of the node's own interfaces
	// (internal/nodeaddrs: not kube-ipvs0's, nor any dummy's), watched over rtnetlink.
	Never []netip.Prefix
	// NodeNetNS is the path of the network namespace whose interfaces are the node's; empty: the
	// agent's own, which is the node's (it runs with hostNetwork). Tests name a namespace
	// standing in for the node's.
	NodeNetNS string
	// Applier programs the namespaces; apply.New() if nil.
	Applier *apply.Applier
	// DNS, when set, serves the mesh DNS in every captured pod whose DNS is the mesh's, and
	// redirects its DNS queries there (meshdns.go). Nil: pods' DNS is left alone.
	DNS *DNSOptions
}

// captureSyncs counts the capture's syncs and checks, per namespace, by result.
var captureSyncs = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "aether_agent_capture_syncs_total",
	Help: "Syncs and resync checks of a meshed pod's capture table (table inet aether in its network namespace), by result: " +
		"unchanged (nothing sent), applied (one batch of the difference), repaired (the table had been changed by someone else, " +
		"and one batch brought it back), failed (logged, and a Warning Event on the pod).",
}, []string{resultLabel})

func init() {
	ctrlmetrics.Registry.MustRegister(captureSyncs)
	for _, r := range apply.Results() {
		captureSyncs.WithLabelValues(string(r))
	}
}

// capturer is the agent's writer of capture: it gathers the capture pods and writes their
// tables; the rulesets are internal/capture's (pure).
type capturer struct {
	applier *apply.Applier
	// options are the rulesets' options: the flags', and the node's addresses of the last sync
	// (sync writes them, under mu; Program reads them under mu).
	options capture.Options
	// interfaces keeps the node's interface addresses current; a change asks for a rebuild.
	interfaces *nodeaddrs.Watcher
	resync     time.Duration
	// mode is a pod's capture mode unless its annotation names another (XDSOptions.CaptureMode).
	mode model.CaptureMode
	// issuer is the mesh's identity issuer (XDSOptions.Issuer): without one, capture takes no
	// raw-TCP port of a dial surface.
	issuer workloadidentity.Issuer
	node   string
	client client.Client // writes Events
	view   *View
	netns  *NetNS
	specs  *podSpecs // the publisher's: the pods' parsed annotations
	log    logr.Logger

	mu sync.Mutex
	// services are the last mesh's, for a pod programmed between two rebuilds (Program).
	services []model.Service
	synced   bool
	// programmed are the pods whose namespace the applier holds, by UID.
	programmed map[types.UID]capturePod
	// failed is, per pod, the last error it was told about (an Event per new error).
	failed map[types.UID]string
	// warned is, per service, the ports of the scoped warning it was told (once per service).
	warned map[types.NamespacedName]string
	// dns serves the mesh DNS in the pods; nil without CaptureOptions.DNS.
	dns *dnsServers
	// built are the last sync's rulesets, by rulesetKey, with the mesh each was built from: a
	// sync whose mesh capture reads alike (capture.SameInputs) reuses a pod's ruleset rather than
	// building every service's sets again (an endpoint's health changes no table). Only sync
	// reads and writes it: the rebuild loop's.
	built map[string]builtRuleset
}

// builtRuleset is a ruleset and the mesh it was built from (read only, as the model is).
type builtRuleset struct {
	mesh model.Mesh
	rs   capture.Ruleset
}

// capturePod is a pod capture programs: its facts as a LocalPod, and its reference for Events.
type capturePod struct {
	local model.LocalPod
	pod   *corev1.Pod // its metadata only
}

// newCapturer is the capturer of the publisher p's options.
func newCapturer(o CaptureOptions, p *publisher) *capturer {
	applier := o.Applier
	if applier == nil {
		applier = apply.New()
	}
	log := p.log.WithName("capture")
	c := &capturer{applier: applier, options: capture.Options{ProxyUID: o.ProxyUID, Never: o.Never}, resync: cmp.Or(o.Resync, DefaultCaptureResync),
		mode: p.opts.CaptureMode, issuer: p.opts.Issuer, node: p.node, client: p.client, view: p.view, netns: p.opts.NetNS, specs: p.specs, log: log,
		programmed: map[types.UID]capturePod{}, failed: map[types.UID]string{}, warned: map[types.NamespacedName]string{}}
	c.interfaces = nodeaddrs.NewWatcher(o.NodeNetNS, log.WithName("node-addresses"))
	if o.DNS != nil {
		c.dns = newDNSServers(*o.DNS, p.opts.MeshDomain, p.log)
	}
	return c
}

// capturePods are the node's meshed pods whose namespace the CNI plugin handed over (the NetNS
// registry; never --netns-path-template's stand-in, which names no real namespace): each one, from
// the moment it is handed over, before it has a MeshEndpoint, so no meshed pod runs uncaptured.
// left are the pods of the registry that left the mesh (a label or namespace change): their
// tables go. mode is a pod's capture mode (the publisher's, which warns of a bad annotation).
func (c *capturer) capturePods(pods []corev1.Pod, node string, ignored registration.IgnoredNamespaces,
	mode func(*corev1.Pod) model.CaptureMode) (in []capturePod, left []types.UID) {
	for i := range pods {
		pod := &pods[i]
		path, recorded := c.netns.path(pod.UID)
		switch {
		case pod.Spec.NodeName != node || !recorded:
		case !ignored.InMesh(pod):
			left = append(left, pod.UID)
		default:
			in = append(in, newCapturePod(c.specs, pod, path, mode(pod), c.dns != nil))
		}
	}
	slices.SortFunc(in, func(a, b capturePod) int {
		return cmp.Or(cmp.Compare(a.local.Namespace, b.local.Namespace), cmp.Compare(a.local.Name, b.local.Name))
	})
	return in, left
}

// newCapturePod is pod as capture reads it; meshDNS says whether the agent serves the mesh DNS.
func newCapturePod(specs *podSpecs, pod *corev1.Pod, netns string, mode model.CaptureMode, meshDNS bool) capturePod {
	local := model.LocalPod{Namespace: pod.Namespace, Name: pod.Name, UID: string(pod.UID), NetNS: netns, Capture: mode,
		MeshDNS: meshDNS && wantsMeshDNS(pod)}
	local.ExcludeOutboundPorts, local.Upstreams = captureFacts(specs.parse(pod))
	meta := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID}}
	return capturePod{local: local, pod: meta}
}

// captureFacts are what a pod's parsed annotations (podSpecs.parse) say to capture: the ports it
// excludes and the services it calls, copied (the parsed Spec is shared). Annotations that do not
// parse say nothing here: the pod is refused registration, with an Event, by the pod reconciler.
func captureFacts(spec portspec.Spec, err error) (exclude []int32, upstreams []string) {
	if err != nil {
		return nil, nil
	}
	return slices.Clone(spec.ExcludeOutboundPorts), slices.Clone(spec.Upstreams)
}

// sync programs every capture pod from mesh m and the node's addresses node, forgets the pods
// whose namespace is gone (CNI DEL), removes the tables of pods that left the mesh, and tells
// each scoped-mode gap once. New node addresses build every pod's ruleset again: each namespace
// then gets one batch of node_addrs elements, its rules untouched.
func (c *capturer) sync(ctx context.Context, m model.Mesh, node []netip.Addr, pods []capturePod, left []types.UID) {
	c.mu.Lock()
	c.services, c.synced = m.Services, true
	moved := !slices.Equal(c.options.Node, node)
	if moved {
		c.options.Node = node
	}
	c.mu.Unlock()
	if moved {
		c.built = nil // built with the old addresses
		c.log.Info("The node's addresses, which no pod's capture redirects (sets node_addrs4 and node_addrs6)", "addresses", node)
	}
	rulesets := newRulesets(c, m)
	current := make(map[types.UID]bool, len(pods))
	for _, p := range pods {
		current[types.UID(p.local.UID)] = true
		c.program(ctx, p, rulesets.of(p.local))
	}
	c.built = rulesets.built
	c.mu.Lock()
	gone := map[types.UID]capturePod{}
	for uid, p := range c.programmed {
		if !current[uid] {
			gone[uid] = p
		}
	}
	c.mu.Unlock()
	for uid, p := range gone {
		if _, recorded := c.netns.path(uid); recorded && !slices.Contains(left, uid) {
			continue // not in the cache yet, or no longer: kept until the registry forgets it
		}
		c.drop(uid, p, slices.Contains(left, uid))
	}
	locals := make([]model.LocalPod, len(pods))
	for i, p := range pods {
		locals[i] = p.local
	}
	c.warnScopedGaps(ctx, capture.ScopedGaps(m, locals))
}

// rulesets are one sync's rulesets: pods alike share one ruleset, and its sets' memory.
type rulesets struct {
	c     *capturer
	m     model.Mesh
	built map[string]builtRuleset // by rulesetKey
}

func newRulesets(c *capturer, m model.Mesh) *rulesets {
	return &rulesets{c: c, m: m, built: map[string]builtRuleset{}}
}

// of is capture.Build(m, p, c.options): the last sync's ruleset for pods like p when capture
// reads the same of its mesh as of m, else built (TestCaptureRulesetsAreBuilds).
func (r *rulesets) of(p model.LocalPod) capture.Ruleset {
	key := rulesetKey(p)
	if b, ok := r.built[key]; ok {
		return b.rs
	}
	b, ok := r.c.built[key]
	if !ok || !capture.SameInputs(b.mesh, r.m, p.Capture) {
		b = builtRuleset{mesh: r.m, rs: capture.Build(r.m, p, r.c.options)}
	}
	r.built[key] = b
	return b.rs
}

// rulesetKey is what of a pod its ruleset depends on, beyond the mesh.
func rulesetKey(p model.LocalPod) string {
	return fmt.Sprint(p.Capture, p.ExcludeOutboundPorts, p.MeshDNS)
}

// program syncs pod p's namespace to rs, counts the result and tells a failure.
func (c *capturer) program(ctx context.Context, p capturePod, rs capture.Ruleset) {
	rep, err := c.applier.Sync(p.local.NetNS, rs)
	c.mu.Lock()
	c.programmed[types.UID(p.local.UID)] = p
	c.mu.Unlock()
	c.report(ctx, p, rep, err)
	c.serveDNS(p)
}

// serveDNS starts or stops pod p's mesh DNS as its capture redirects its DNS or not.
func (c *capturer) serveDNS(p capturePod) {
	switch {
	case c.dns == nil:
	case p.local.MeshDNS:
		c.dns.ensure(types.UID(p.local.UID), p.local.Namespace+"/"+p.local.Name, p.local.NetNS)
	default:
		c.dns.stop(types.UID(p.local.UID))
	}
}

// drop forgets pod p's namespace; when the pod left the mesh, its table is deleted first.
func (c *capturer) drop(uid types.UID, p capturePod, left bool) {
	if left {
		if err := c.applier.Remove(p.local.NetNS); err != nil {
			c.log.Error(err, "Could not remove the capture table of a pod that left the mesh", "pod", p.local.Namespace+"/"+p.local.Name)
		} else {
			c.log.Info("Removed the capture table of a pod that left the mesh", "pod", p.local.Namespace+"/"+p.local.Name, "netns", p.local.NetNS)
		}
	} else {
		c.applier.Forget(p.local.NetNS)
	}
	c.mu.Lock()
	delete(c.programmed, uid)
	delete(c.failed, uid)
	c.mu.Unlock()
	if c.dns != nil {
		c.dns.stop(uid)
	}
}

// check is the periodic cheap check of every programmed namespace (apply.Applier.Check). It
// reads the node's interface addresses again too, in case an announcement of a change was lost
// (a change asks for a rebuild).
func (c *capturer) check(ctx context.Context) {
	if _, err := c.interfaces.Refresh(); err != nil {
		c.log.Error(err, "Could not read the node's interface addresses; the last ones read stay")
	}
	c.mu.Lock()
	pods := make([]capturePod, 0, len(c.programmed))
	for _, p := range c.programmed {
		pods = append(pods, p)
	}
	c.mu.Unlock()
	for _, p := range pods {
		rep, err := c.applier.Check(p.local.NetNS)
		c.report(ctx, p, rep, err)
	}
}

// report counts a sync's result, logs a repair, and tells a new failure (a log line and a Warning
// Event on the pod, whose name is derived from the pod and the error, so it is told once).
func (c *capturer) report(ctx context.Context, p capturePod, rep apply.Report, err error) {
	captureSyncs.WithLabelValues(string(rep.Result)).Inc()
	uid := types.UID(p.local.UID)
	if err == nil {
		if rep.Result == apply.Repaired {
			c.log.Info("Repaired a pod's capture table that someone else had changed", "pod", p.local.Namespace+"/"+p.local.Name,
				"netns", p.local.NetNS, "elementsAdded", rep.Stats.ElementsAdded, "rulesAdded", rep.Stats.RulesAdded)
		}
		c.mu.Lock()
		delete(c.failed, uid)
		c.mu.Unlock()
		return
	}
	text := err.Error()
	c.mu.Lock()
	told := c.failed[uid] == text
	c.mu.Unlock()
	if told {
		return
	}
	c.log.Error(err, "Could not program a pod's capture; retrying on the next change and every resync",
		"pod", p.local.Namespace+"/"+p.local.Name, "netns", p.local.NetNS)
	note := conditions.Truncate(fmt.Sprintf("capture (table %s %s in %s): %v; the agent retries on the next change and every %s",
		capture.TableFamily, capture.TableName, p.local.NetNS, err, c.resync), conditions.MaxEventNote)
	if c.event(ctx, podEventName(p.pod, ReasonCaptureFailed, text), podReference(p.pod), ReasonCaptureFailed, note) {
		c.mu.Lock()
		c.failed[uid] = text
		c.mu.Unlock()
	}
}

// warnScopedGaps tells each gap once per service and ports: a log line and a Warning Event on
// the MeshService.
func (c *capturer) warnScopedGaps(ctx context.Context, gaps []capture.ScopedGap) {
	now := map[types.NamespacedName]bool{}
	for _, g := range gaps {
		key := types.NamespacedName{Namespace: g.Namespace, Name: g.Name}
		now[key] = true
		ports := fmt.Sprint(g.Ports)
		if c.warned[key] == ports {
			continue
		}
		note := conditions.Truncate(fmt.Sprintf("TCP ports %s of %s are not reached by :%d (it reaches the default TCP port only), "+
			"and scoped capture takes only :%d and :%d: pods on node %s that capture in scoped mode (%s) do not reach them through "+
			"the mesh; set %s: surface (or all) on those pods", strings.Trim(ports, "[]"), key, meshv1alpha1.MeshTCPPort,
			meshv1alpha1.MeshHTTPPort, meshv1alpha1.MeshTCPPort, c.node, strings.Join(g.Callers, ", "), model.AnnotationCaptureMode),
			conditions.MaxEventNote)
		ref, err := c.serviceReference(ctx, key)
		if err != nil {
			c.log.Error(err, "Could not read a MeshService to warn about its scoped-mode gap; retrying on the next rebuild", "service", key)
			continue
		}
		c.log.Info("A service's TCP ports are not captured for scoped-mode pods on this node", "service", key, "ports", g.Ports, "pods", g.Callers)
		if c.event(ctx, serviceEventName(ref, ReasonScopedPortsUncaptured, ports), ref, ReasonScopedPortsUncaptured, note) {
			c.warned[key] = ports
		}
	}
	for key := range c.warned {
		if !now[key] {
			delete(c.warned, key)
		}
	}
}

// serviceReference is the reference of MeshService key, for an Event (its UID from the view).
func (c *capturer) serviceReference(ctx context.Context, key types.NamespacedName) (corev1.ObjectReference, error) {
	ms := &meshv1alpha1.MeshService{}
	if err := c.view.cache.Get(ctx, key, ms); err != nil {
		return corev1.ObjectReference{}, fmt.Errorf("reading MeshService %s: %w", key, err)
	}
	return corev1.ObjectReference{APIVersion: meshv1alpha1.GroupVersion.String(), Kind: "MeshService",
		Namespace: ms.Namespace, Name: ms.Name, UID: ms.UID}, nil
}

// event writes a Warning Event of a deterministic name (one that exists already was written
// before: by this agent, or by one before a restart); false when the write failed (logged).
func (c *capturer) event(ctx context.Context, name string, regarding corev1.ObjectReference, reason, note string) bool {
	event := &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Namespace: regarding.Namespace, Name: name},
		EventTime:           metav1.NewMicroTime(time.Now()),
		ReportingController: ReportingController,
		ReportingInstance:   reportingInstance(c.node),
		Action:              ActionCapture,
		Reason:              reason,
		Type:                corev1.EventTypeWarning,
		Regarding:           regarding,
		Note:                note,
	}
	if err := createEvent(ctx, c.client, event); err != nil && !apierrors.IsAlreadyExists(err) {
		c.log.Error(err, "Could not write a Warning Event; retrying on the next rebuild", "reason", reason, "regarding", regarding.Namespace+"/"+regarding.Name)
		return false
	}
	return true
}

// serviceEventName is "<service>.<digest of its UID and what the Event says>", cut to fit.
func serviceEventName(ref corev1.ObjectReference, says ...string) string {
	sum := sha256.Sum256([]byte(string(ref.UID) + "\x00" + strings.Join(says, "\x00")))
	suffix := "." + hex.EncodeToString(sum[:8])
	name := ref.Name
	if limit := 253 - len(suffix); len(name) > limit {
		name = strings.TrimRight(name[:limit], "-.")
	}
	return name + suffix
}

// errCaptureNotReady refuses a Program before the first rebuild listed the mesh.
var errCaptureNotReady = errors.New("the agent has not listed the mesh yet (its caches are syncing); the kubelet retries the pod's sandbox")

// Program programs pod's capture in netns now, from the last rebuild's mesh: for the CNI
// hand-over, which must not return before the pod's namespace is captured. The next rebuild
// syncs it again with the rest (and warns of an annotation that names no mode: here the agent's
// mode applies to it, silently).
func (c *capturer) Program(ctx context.Context, pod *corev1.Pod, netns string) error {
	c.mu.Lock()
	services, synced, options := c.services, c.synced, c.options
	c.mu.Unlock()
	if !synced {
		return errCaptureNotReady
	}
	mode, err := model.ParseCaptureMode(pod.Annotations[model.AnnotationCaptureMode])
	if err != nil {
		mode = c.mode
	}
	p := newCapturePod(c.specs, pod, netns, mode, c.dns != nil)
	rs := capture.Build(model.Mesh{Issuer: c.issuer, Services: services}, p.local, options)
	rep, err := c.applier.Sync(netns, rs)
	c.mu.Lock()
	c.programmed[pod.UID] = p
	c.mu.Unlock()
	c.report(ctx, p, rep, err)
	c.serveDNS(p)
	return err
}

// Forget drops what capture keeps of pod uid (CNI DEL: its namespace is going away).
func (c *capturer) Forget(uid types.UID) {
	c.mu.Lock()
	p, ok := c.programmed[uid]
	c.mu.Unlock()
	if ok {
		c.drop(uid, p, false)
	}
}

// syncCapture syncs the capture of the node's pods from mesh m (the rebuild's): the pods are
// listed from the same cache as m's, with capture's criteria (capturePods), not m.Pods' (which
// waits for a verified MeshEndpoint and an identity); the node's addresses are m's (its Node's,
// from the same cache, and its interfaces': publisher.mesh).
func (p *publisher) syncCapture(ctx context.Context, m model.Mesh) error {
	var pods corev1.PodList
	if err := p.cache.List(ctx, &pods); err != nil {
		return fmt.Errorf("listing the node's pods: %w", err)
	}
	in, left := p.capture.capturePods(pods.Items, p.node, p.ignored, func(pod *corev1.Pod) model.CaptureMode {
		return p.captureMode(ctx, pod)
	})
	p.capture.sync(ctx, m, m.Node.Addrs, in, left)
	return nil
}

// cniCapture is the capturer as the CNI server's CaptureProgrammer: the plugin's ADD programs the
// pod's table before it returns, and DEL forgets it.
type cniCapture struct{ c *capturer }

func (a cniCapture) Program(ctx context.Context, p CapturePod) error {
	return a.c.Program(ctx, p.Pod, p.NetNS)
}

func (a cniCapture) Forget(uid types.UID) { a.c.Forget(uid) }
