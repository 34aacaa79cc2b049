// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1 "github.com/aether-mesh/aether-operator/api/config/v1"
	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/accesslog"
	"github.com/aether-mesh/aether-operator/internal/agent/svid"
	"github.com/aether-mesh/aether-operator/internal/conditions"
	"github.com/aether-mesh/aether-operator/internal/demand"
	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/netnsprobe"
	"github.com/aether-mesh/aether-operator/internal/nodeaddrs"
	"github.com/aether-mesh/aether-operator/internal/registration"
	"github.com/aether-mesh/aether-operator/internal/resolve"
	"github.com/aether-mesh/aether-operator/internal/workloadidentity"
	"github.com/aether-mesh/aether-operator/internal/xds"
	"github.com/aether-mesh/aether-operator/internal/xdsserver"
)

// ReasonInvalidCaptureMode is the reason of the Warning Event on a pod whose capture-mode
// annotation names no mode.
const ReasonInvalidCaptureMode = "InvalidCaptureMode"

// ActionConfigureProxy is the action of the Events the agent writes while building the node's
// proxy configuration.
const ActionConfigureProxy = "ConfigureProxy"

// XDSOptions turn on xDS serving: the node's mesh (the View's services and this node's pods) is
// built into Envoy resources (internal/xds) and published on Server for node ID = the node name.
type XDSOptions struct {
	// Server serves the snapshots (xdsserver.New over xdsserver.Listen).
	Server *xdsserver.Server
	// MeshDomain is the mesh's DNS domain and trust domain; resolve.DefaultMeshDomain if empty.
	MeshDomain string
	// Issuer is who issues the workload identities (--identity-issuer); SPIRE if empty. Without
	// one (workloadidentity.NoIssuer) the node's configuration has no raw-TCP cluster, and capture takes
	// no raw-TCP port of a dial surface (model.Mesh.Issuer).
	Issuer workloadidentity.Issuer
	// CaptureMode is a pod's capture mode unless its aether.io/capture-mode annotation says
	// otherwise; surface if empty.
	CaptureMode model.CaptureMode
	// NetNS holds the pods' network namespaces (the CNI plugin's, when it exists); an empty
	// registry if nil.
	NetNS *NetNS
	// NetNSPathTemplate, if set, names the netns of a pod NetNS has no path for.
	NetNSPathTemplate *NetNSPathTemplate
	// Capture, when set, programs each meshed pod's capture from the same mesh, after the same
	// rebuilds (capture.go). Nil: no capture.
	Capture *CaptureOptions
	// Identities, when set, fetches the SVIDs of the identities the node's pods hold, and the
	// trust bundle, from the SPIRE agent's Delegated Identity API, and Server serves them to the
	// node's Envoy by SDS (sds.go); Setup runs it. Nil: no secrets are served, and the TLS
	// contexts' secrets stay absent (Envoy waits for them).
	Identities *svid.Source
	// Upstreams says which services the node's Envoy carries before a pod dials them
	// (model.UpstreamsMode, the agent's --upstreams); all if empty. With declared, the services
	// a local identity does not carry are fetched on demand: the Server hands the names over,
	// each rebuild carries them until they go idle (Demands), and each miss is counted.
	Upstreams model.UpstreamsMode
	// HopHTTP3 makes the hop between node proxies prefer HTTP/3 (model.Mesh.HopHTTP3, the agent's
	// --hop-http3): every meshed pod's inbound also listens for QUIC on UDP 18008.
	HopHTTP3 bool
	// Demands is the record of what the node fetched on demand (OpenDemands: kept in a state
	// file, so that a restarted agent's first build carries it); with declared upstreams, one in
	// memory if nil.
	Demands *demand.Record
	// AccessLog, when set, is told the mesh of every build (the services, ports, pods and
	// identities its counters may name); Server must serve it (xdsserver.Options.AccessLog).
	AccessLog *accesslog.Server
	// ProxyConfig serves each pod's part of the node's published configuration
	// (internal/proxyconfig, kubectl aether proxy-config) at proxyconfig.Path on the manager's
	// metrics server, under its authentication and authorization (MetricsOptions, secure): never
	// on a server without them (--proxy-config with --metrics-secure).
	ProxyConfig bool

	// serverHook, set by tests only, changes a proxyless server's listeners before they are
	// published (the negative control of the server-side authorization test).
	serverHook func(*xds.Resources)
}

// publisher rebuilds the node's xDS configuration when an input changes, debounced, and publishes
// it. It gathers inputs and writes outputs: the build itself is pure (xds.Builder, which builds
// what xds.Build does, reusing from the last build what the change left alone).
type publisher struct {
	cache   cache.Cache   // the manager's: this node's pods, MeshEndpoints and Node
	client  client.Client // writes Events
	view    *View
	node    string
	ignored registration.IgnoredNamespaces
	opts    XDSOptions
	log     logr.Logger

	kick chan struct{}
	// warned is, per pod, the invalid capture mode it was warned about (so it is told once).
	// Only the rebuild loop touches it.
	warned map[types.UID]string
	// skipped are the notes of the last build's Resources.Skipped, each logged once when it
	// appears. Only the rebuild loop touches it.
	skipped map[string]bool
	// capture programs the pods' capture tables; nil without XDSOptions.Capture.
	capture *capturer
	// builder builds the node's resources: after one endpoint changes, about that service's work.
	// Only the rebuild loop touches it (a Builder is not safe for concurrent use).
	builder xds.Builder
	// unserved are, per proxyless client served nothing, why; proxylessSkipped the notes of the
	// last proxyless builds. Each is logged once when it appears (proxyless.go). Only the rebuild
	// loop touches them.
	unserved         map[string]string
	proxylessSkipped map[string]bool
	// times, when set, records when each published snapshot held or dropped each endpoint.
	times *EndpointTimes
	// uds decides which pods' inbound goes to their Unix socket (LocalPod.UDSPath); nil: none.
	uds *udsResolver
	// specs are the node's meshed pods' parsed annotations, kept for the pods of the last listing.
	specs *podSpecs
	// leftOut are, by PodKey, why the last listing left each of the node's meshed pods out of the
	// model: what the proxy-config endpoint says of a pod with no configuration.
	leftOut atomic.Pointer[map[string]string]
	// demands are the services the node's identities asked for on demand; nil unless the node
	// carries declared upstreams only.
	demands *demand.Record
	// noIPv6 is, by network namespace path, whether IPv6 loopback could not be bound there
	// (model.LocalPod.NoIPv6), probed once per path. Only the rebuild loop touches it.
	noIPv6 map[string]bool
	// lastPods are the last listing's local pods, by UID: what a pod whose drain tail runs keeps
	// (withDrainTails). Only the rebuild loop touches it.
	lastPods map[types.UID]model.LocalPod
}

// newPublisher is the publisher of o.XDS, its unset options defaulted: the default mesh domain,
// the SPIRE issuer, the surface capture mode, an empty netns registry.
func newPublisher(c cache.Cache, cl client.Client, log logr.Logger, o Options) *publisher {
	opts := *o.XDS
	opts.MeshDomain = cmp.Or(opts.MeshDomain, resolve.DefaultMeshDomain)
	opts.Issuer = cmp.Or(opts.Issuer, workloadidentity.SPIRE)
	opts.CaptureMode = cmp.Or(opts.CaptureMode, model.CaptureSurface)
	opts.Upstreams = cmp.Or(opts.Upstreams, model.UpstreamsAll)
	if opts.NetNS == nil {
		opts.NetNS = NewNetNS()
	}
	p := &publisher{cache: c, client: cl, view: o.View, node: o.NodeName, ignored: o.IgnoredNamespaces, opts: opts,
		log: log.WithName("xds"), kick: make(chan struct{}, 1), warned: map[types.UID]string{},
		skipped: map[string]bool{}, times: o.EndpointTimes, specs: newPodSpecs()}
	if opts.Capture != nil {
		p.capture = newCapturer(*opts.Capture, p)
	}
	// A proxyless gRPC client connecting or going is a reason to rebuild (proxyless.go); the
	// server reads its callers' pods, on both sockets, from this node's (callerPod).
	opts.Server.OnProxylessChange(p.poke)
	opts.Server.ResolvePodsWith(p.callerPod)
	if opts.Upstreams.OnDemand() {
		p.demands = opts.Demands
		if p.demands == nil {
			p.demands, _ = OpenDemands("", p.log) // in memory: nothing to read
		}
		opts.Server.OnClusterDemand(p.demands.Ask(p.node, p.poke))
		if opts.AccessLog != nil {
			opts.AccessLog.OnUpstream(func(cluster string) { p.demands.Touch(cluster, time.Now()) })
		}
	}
	return p
}

// NeedLeaderElection is false: every node's agent configures its own node's Envoy.
func (p *publisher) NeedLeaderElection() bool { return false }

// poke asks for a rebuild; it never blocks (one pending request stands for any number).
func (p *publisher) poke() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// changes is an informer handler that pokes on every add, update and delete.
func changes(poke func()) toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { poke() },
		UpdateFunc: func(any, any) { poke() },
		DeleteFunc: func(any) { poke() },
	}
}

// Start watches every input, waits for the caches to hold the cluster's state (a build from a
// cache still filling would publish a mesh with services missing), then rebuilds on changes until
// ctx ends.
func (p *publisher) Start(ctx context.Context) error {
	// AccessPolicies decide what the inbound chains admit (model.PodAccess): watched whatever else is on.
	inputs := []client.Object{&corev1.Pod{}, &meshv1alpha1.MeshEndpoint{}, &corev1.Node{}, &configv1.AccessPolicy{}}
	if p.uds != nil && p.uds.opts.Enabled {
		// A policy, or a Service's selector, decides which pods serve on a socket.
		inputs = append(inputs, &configv1.EndpointPolicy{}, &corev1.Service{})
	}
	for _, obj := range inputs {
		informer, err := p.cache.GetInformer(ctx, obj)
		if err != nil {
			return fmt.Errorf("watching %T for xDS: %w", obj, err)
		}
		if _, err := informer.AddEventHandler(changes(p.poke)); err != nil {
			return fmt.Errorf("watching %T for xDS: %w", obj, err)
		}
	}
	if err := p.view.onChange(ctx, changes(p.poke)); err != nil {
		return err
	}
	p.opts.NetNS.onChange(p.poke)
	if p.capture != nil {
		// Read before the first rebuild, which programs the node's addresses into every pod.
		if err := p.capture.interfaces.Start(ctx, p.poke); err != nil {
			return fmt.Errorf("reading the node's interface addresses for capture: %w", err)
		}
	}
	if p.capture != nil && p.capture.dns != nil {
		// Registered before the caches sync: the table holds every service before the first
		// rebuild starts the pods' servers.
		if err := p.capture.dns.watchMeshServices(ctx, p.view); err != nil {
			return err
		}
		defer p.capture.dns.stopAll()
	}
	if !p.cache.WaitForCacheSync(ctx) || !p.view.WaitForCacheSync(ctx) {
		return nil // ctx ended
	}
	p.poke()
	return p.loop(ctx)
}

// loop rebuilds once a burst of changes is quiet (rebuildQuiet), at most rebuildMax after its
// first change; with capture, it also checks the programmed namespaces every resync.
func (p *publisher) loop(ctx context.Context) error {
	d := debouncer{quiet: rebuildQuiet, max: rebuildMax}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	var resync, expire <-chan time.Time
	if p.capture != nil {
		ticker := time.NewTicker(p.capture.resync)
		defer ticker.Stop()
		resync = ticker.C
	}
	if p.demands != nil {
		// A service fetched on demand goes when idle for demand.IdleTTL: checked each minute.
		ticker := time.NewTicker(time.Minute)
		defer ticker.Stop()
		expire = ticker.C
	}
	for {
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil
		case <-p.kick:
			d.add(time.Now())
		case <-resync:
			p.capture.check(ctx)
			continue
		case now := <-expire:
			if next := p.demands.Next(); next.IsZero() || now.Before(next) {
				continue
			}
			d.add(now)
		case <-timer.C:
		}
		wait, pending := d.wait(time.Now())
		switch {
		case !pending:
		case wait > 0:
			timer.Reset(wait)
		default:
			d.take()
			p.rebuild(ctx)
		}
	}
}

// rebuild builds the node's configuration and publishes it (xdsserver publishes only a change),
// then, with capture, syncs the pods' capture tables from the same mesh. A failure is logged with
// its reason and counted; the snapshot served, and the tables programmed, stay.
func (p *publisher) rebuild(ctx context.Context) {
	m, err := p.mesh(ctx)
	listed := err == nil
	if listed && p.demands != nil {
		m = p.demands.Apply(m, time.Now())
	}
	var res xds.Resources
	if listed && p.opts.Identities != nil {
		// First: an identity new to the node is asked of SPIRE before its clusters are served.
		p.opts.Identities.Want(podIdentities(m.Pods))
	}
	if listed && p.opts.AccessLog != nil {
		p.opts.AccessLog.SetMesh(m)
	}
	if listed {
		// Proxyless gRPC clients first: theirs does not wait on (or fail with) the node's Envoy's.
		p.publishProxyless(ctx, m)
		res, err = p.builder.Build(m)
	}
	if err != nil {
		xdsBuilds.WithLabelValues(BuildFailed).Inc()
		p.log.Error(err, "Could not build the node's xDS configuration; the previous one stays in service", "node", p.node)
	} else {
		xdsBuilds.WithLabelValues(BuildBuilt).Inc()
		p.reportSkipped(res.Skipped)
		// An error is the server's to log and count (an inconsistent snapshot); the previous stays.
		if published, _ := p.opts.Server.Publish(p.node, res); published {
			p.times.published(time.Now(), m.Services, res.Endpoints)
		}
	}
	if p.capture != nil && listed { // a build failure does not stop capture
		if err := p.syncCapture(ctx, m); err != nil {
			p.log.Error(err, "Could not sync the pods' capture; the tables programmed stay", "node", p.node)
		}
	}
}

// reportSkipped logs each note of what a build left out once, when it appears (a rebuild that
// leaves the same pod out says nothing new), and sets the gauge to how many there are now.
func (p *publisher) reportSkipped(notes []string) {
	now := make(map[string]bool, len(notes))
	for _, note := range notes {
		now[note] = true
		if !p.skipped[note] {
			p.log.Info("Left out of the node's xDS configuration", "node", p.node, "reason", note)
		}
	}
	p.skipped = now
	xdsSkipped.Set(float64(len(notes)))
}

// mesh is the node's model, from the caches: the cluster's services and accepted routes (the
// View), this node's locality and its meshed pods, with the mesh's domain and identity issuer
// (the agent's flags). A thin lister: everything after it is pure.
func (p *publisher) mesh(ctx context.Context) (model.Mesh, error) {
	services, err := p.view.Services(ctx)
	if err != nil {
		return model.Mesh{}, err
	}
	m := model.Mesh{Domain: p.opts.MeshDomain, Issuer: p.opts.Issuer, Node: model.Node{Name: p.node}, Services: services,
		Upstreams: p.opts.Upstreams, HopHTTP3: p.opts.HopHTTP3}
	// The routes the controller accepted (ResolvedRefs=True for their current generation).
	if m.Routes, err = p.view.Routes(ctx); err != nil {
		return model.Mesh{}, err
	}
	node := &corev1.Node{}
	switch err := p.cache.Get(ctx, client.ObjectKey{Name: p.node}, node); {
	case err == nil:
		m.Node.Locality = registration.Locality(node)
	case apierrors.IsNotFound(err): // no locality, and its interfaces' addresses only, until the Node is seen
		node = nil
	default:
		return model.Mesh{}, fmt.Errorf("reading node %s: %w", p.node, err)
	}
	// The node's addresses, one reading for capture and the proxyless servers' probe exemption.
	var interfaces []netip.Addr
	if p.capture != nil {
		interfaces = p.capture.interfaces.Addrs()
	}
	m.Node.Addrs = nodeaddrs.Merge(nodeaddrs.FromNode(node), interfaces)
	m.Pods, err = p.localPods(ctx, services)
	return m, err
}

// localPods are this node's meshed pods that can have a proxy: each with a MeshEndpoint of its
// own that the controller Verified, a MeshService identity, and a network namespace. The others
// are left out (logged at V(1) with why) until they have all three; a pod whose drain tail runs
// keeps its last listing's (withDrainTails). Sorted by namespace and name.
func (p *publisher) localPods(ctx context.Context, services []model.Service) ([]model.LocalPod, error) {
	identities := make(map[types.NamespacedName]string, len(services))
	for _, s := range services {
		identities[types.NamespacedName{Namespace: s.Namespace, Name: s.Name}] = s.Identity
	}
	var pods corev1.PodList
	if err := p.cache.List(ctx, &pods); err != nil {
		return nil, fmt.Errorf("listing the node's pods: %w", err)
	}
	var policies configv1.AccessPolicyList
	if err := p.cache.List(ctx, &policies); err != nil {
		return nil, fmt.Errorf("listing the AccessPolicies: %w", err)
	}
	byNamespace := map[string][]configv1.AccessPolicy{}
	for _, pol := range policies.Items {
		byNamespace[pol.Namespace] = append(byNamespace[pol.Namespace], pol)
	}
	var out []model.LocalPod
	seen := make(map[types.UID]bool, len(pods.Items))
	leftOut := map[string]string{}
	draining := p.opts.NetNS.draining()
	for i := range pods.Items {
		pod := &pods.Items[i]
		// Explicit, whatever the cache's field selector holds.
		if pod.Spec.NodeName != p.node || !p.ignored.InMesh(pod) {
			continue
		}
		seen[pod.UID] = true
		if _, ok := draining[pod.UID]; ok {
			continue // its sandbox is deleted: withDrainTails keeps what it had
		}
		lp, why, err := p.localPod(ctx, pod, identities, byNamespace[pod.Namespace])
		if err != nil {
			return nil, err
		}
		if why != "" {
			p.log.V(1).Info("Pod gets no proxy configuration yet", "pod", client.ObjectKeyFromObject(pod), "reason", why)
			leftOut[xds.PodKey(pod.Namespace, pod.Name)] = why
			continue
		}
		out = append(out, lp)
	}
	out = p.withDrainTails(out, draining)
	p.leftOut.Store(&leftOut)
	p.specs.keep(seen)
	kept := make(map[string]bool, len(out))
	for _, lp := range out {
		kept[lp.NetNS] = true
	}
	maps.DeleteFunc(p.noIPv6, func(path string, _ bool) bool { return !kept[path] })
	for uid := range p.warned {
		if !seen[uid] {
			delete(p.warned, uid)
		}
	}
	if p.uds != nil {
		p.uds.forget(seen)
	}
	slices.SortFunc(out, func(a, b model.LocalPod) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return out, nil
}

// withDrainTails is out with, for each pod whose drain tail runs (draining: its deleted sandbox's
// namespace, by UID), the local pod of the last listing, as it was: its listeners stay in the
// node Envoy's configuration while the tail runs, whatever became of its Pod and MeshEndpoint
// meanwhile (the kubelet deletes the Pod, and the agent its MeshEndpoint, once the containers are
// gone), so that connections still finishing through them are not cut. They go with the rebuild
// the tail's end asks for. A pod that had no listeners gets none; nor does one whose name a pod
// of out holds now (a StatefulSet's replacement: its listeners, of the same names, win). The last
// listing is then out.
func (p *publisher) withDrainTails(out []model.LocalPod, draining map[types.UID]string) []model.LocalPod {
	holds := make(map[string]bool, len(out))
	for _, lp := range out {
		holds[xds.PodKey(lp.Namespace, lp.Name)] = true
	}
	for uid, path := range draining {
		lp, ok := p.lastPods[uid]
		if ok && lp.NetNS == path && !holds[xds.PodKey(lp.Namespace, lp.Name)] {
			out = append(out, lp)
		}
	}
	p.lastPods = make(map[types.UID]model.LocalPod, len(out))
	for _, lp := range out {
		p.lastPods[types.UID(lp.UID)] = lp
	}
	return out
}

// localPod is pod as its proxy needs it, or why it cannot have one yet; policies are the
// AccessPolicies of its namespace.
func (p *publisher) localPod(ctx context.Context, pod *corev1.Pod, identities map[types.NamespacedName]string,
	policies []configv1.AccessPolicy) (model.LocalPod, string, error) {
	ep := &meshv1alpha1.MeshEndpoint{}
	if err := p.cache.Get(ctx, client.ObjectKeyFromObject(pod), ep); apierrors.IsNotFound(err) {
		return model.LocalPod{}, "it has no MeshEndpoint yet", nil
	} else if err != nil {
		return model.LocalPod{}, "", fmt.Errorf("reading the MeshEndpoint of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	if ep.Spec.PodUID != string(pod.UID) {
		return model.LocalPod{}, "its MeshEndpoint is an earlier pod's of the same name", nil
	}
	if !registration.Verified(ep) {
		return model.LocalPod{}, "its MeshEndpoint is not Verified for its current spec", nil
	}
	identity := identities[types.NamespacedName{Namespace: pod.Namespace, Name: ep.Spec.ServiceName}]
	if identity == "" {
		return model.LocalPod{}, "its MeshService " + ep.Spec.ServiceName + " has no identity yet", nil
	}
	netns, why := p.netns(pod)
	if why != "" {
		return model.LocalPod{}, why, nil
	}
	lp := model.LocalPod{Namespace: pod.Namespace, Name: pod.Name, UID: string(pod.UID), Service: ep.Spec.ServiceName,
		Address: ep.Spec.Address, Primary: ep.Spec.PrimaryPort, Ports: ep.Spec.Ports, NetNS: netns, Identity: identity,
		Capture: p.captureMode(ctx, pod), NoIPv6: p.withoutIPv6(netns)}
	lp.Access = model.PodAccess(p.opts.MeshDomain, lp, policies)
	spec, specErr := p.specs.parse(pod)
	lp.ExcludeOutboundPorts, lp.Upstreams = captureFacts(spec, specErr)
	if p.uds != nil {
		var err error
		if lp.UDSPath, err = p.uds.pathOf(ctx, pod, spec, specErr); err != nil {
			return model.LocalPod{}, "", err
		}
	}
	if err := lp.Validate(); err != nil {
		return model.LocalPod{}, err.Error(), nil
	}
	return lp, "", nil
}

// netns is pod's network namespace path: the one recorded (by the CNI plugin), else the
// template's, else none (and why).
func (p *publisher) netns(pod *corev1.Pod) (path, why string) {
	if path, ok := p.opts.NetNS.path(pod.UID); ok {
		return path, ""
	}
	if p.opts.NetNSPathTemplate == nil {
		return "", "no network namespace was recorded for it (the CNI plugin hands it over; --netns-path-template stands in)"
	}
	path, err := p.opts.NetNSPathTemplate.Path(pod)
	if err != nil {
		return "", err.Error()
	}
	return path, ""
}

// withoutIPv6 says whether IPv6 loopback cannot be bound in the network namespace at path (its
// pod turned IPv6 off), probed the first time the path is seen. A namespace that cannot be entered
// is taken to have IPv6, as the mesh says, and probed again next time: where no namespace is real
// (--netns-path-template under make run) nothing binds there anyway.
func (p *publisher) withoutIPv6(path string) bool {
	if off, ok := p.noIPv6[path]; ok {
		return off
	}
	on, err := netnsprobe.IPv6Loopback(path)
	if err != nil {
		p.log.V(1).Info("Could not read whether the pod's network namespace has IPv6; taking it to have it", "netns", path, "error", err.Error())
		return false
	}
	if p.noIPv6 == nil {
		p.noIPv6 = map[string]bool{}
	}
	p.noIPv6[path] = !on
	if !on {
		p.log.Info("The pod's network namespace has IPv6 turned off: its listeners bind IPv4 only", "netns", path)
	}
	return !on
}

// captureMode is pod's annotation's mode, else the agent's. An annotation that names no mode is
// told once (a Warning Event on the pod and a log line naming the value and the valid ones), and
// the agent's mode applies.
func (p *publisher) captureMode(ctx context.Context, pod *corev1.Pod) model.CaptureMode {
	value, set := pod.Annotations[model.AnnotationCaptureMode]
	if !set {
		delete(p.warned, pod.UID)
		return p.opts.CaptureMode
	}
	mode, err := model.ParseCaptureMode(value)
	if err == nil {
		delete(p.warned, pod.UID)
		return mode
	}
	if p.warned[pod.UID] != value {
		p.warnCaptureMode(ctx, pod, value, err)
	}
	return p.opts.CaptureMode
}

// warnCaptureMode tells pod's owners that its capture-mode annotation is invalid: an Event of a
// name derived from the pod and the value (so it is said once, across restarts) and a log line.
// A failed write is logged and tried again on the next rebuild.
func (p *publisher) warnCaptureMode(ctx context.Context, pod *corev1.Pod, value string, invalid error) {
	note := conditions.Truncate(fmt.Sprintf("%s: %v; the agent's mode %q (--capture-mode) applies", model.AnnotationCaptureMode,
		invalid, p.opts.CaptureMode), conditions.MaxEventNote)
	event := &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Namespace: pod.Namespace, Name: podEventName(pod, ReasonInvalidCaptureMode, value)},
		EventTime:           metav1.NewMicroTime(time.Now()),
		ReportingController: ReportingController,
		ReportingInstance:   reportingInstance(p.node),
		Action:              ActionConfigureProxy,
		Reason:              ReasonInvalidCaptureMode,
		Type:                corev1.EventTypeWarning,
		Regarding:           podReference(pod),
		Note:                note,
	}
	if err := createEvent(ctx, p.client, event); err != nil && !apierrors.IsAlreadyExists(err) {
		p.log.Error(err, "Could not write the Warning Event on a pod's invalid capture mode; retrying on the next rebuild",
			"pod", client.ObjectKeyFromObject(pod), "value", value)
		return
	}
	p.warned[pod.UID] = value
	p.log.Info("Pod's capture-mode annotation names no mode; the agent's mode applies", "pod", client.ObjectKeyFromObject(pod),
		"annotation", model.AnnotationCaptureMode, "value", value, "valid", model.CaptureModes, "mode", p.opts.CaptureMode, "event", event.Name)
}

// whyLeftOut is why the last listing left pod namespace/name out of the node's model; empty when
// it did not (or never saw it).
func (p *publisher) whyLeftOut(namespace, name string) string {
	if m := p.leftOut.Load(); m != nil {
		return (*m)[xds.PodKey(namespace, name)]
	}
	return ""
}

// errNoView is Setup's answer to xDS serving without the cluster view it reads.
var errNoView = errors.New("xDS serving needs the cluster-wide view of the mesh: set Options.View (NewView) with Options.XDS")
