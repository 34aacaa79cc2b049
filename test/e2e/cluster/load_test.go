//go:build e2e

// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package cluster

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/portspec"
)

// The load the fault specs run throughout each fault: managed pods created, deleted and
// re-annotated (their ports change, so their MeshEndpoints and their services' MeshServices and
// Services change), at a bounded rate and count, and a probe that measures how long a change
// takes to reach the mesh.

// labelLoad marks the load's pods (it acts on those only).
const labelLoad = "faults.aether.io/load"

// The two port declarations a load pod switches between: with and without a raw TCP port.
const (
	portsHTTP    = "8080"
	portsHTTPTCP = "8080,9000=tcp"
)

// loadOptions bound a load: it stops by itself after MaxOps operations or MaxTime, whichever
// comes first, or when stopped.
type loadOptions struct {
	// Accounts are the ServiceAccounts its pods run as: one MeshService each.
	Accounts []string
	// MaxPods is the most load pods alive at once; it keeps at least half as many.
	MaxPods int
	// Every is the time between two operations.
	Every time.Duration
	// MaxOps and MaxTime bound it.
	MaxOps  int
	MaxTime time.Duration
}

// defaultLoad is the load of every fault spec: up to 6 pods of 3 services, an operation every
// 600 ms (about 1.7 a second), at most 300 operations or 4 minutes.
var defaultLoad = loadOptions{Accounts: []string{"load-a", "load-b", "load-c"}, MaxPods: 6, Every: 600 * time.Millisecond,
	MaxOps: 300, MaxTime: 4 * time.Minute}

// loadOp is one operation of a load.
type loadOp struct {
	At time.Time
	// Kind is create, delete, annotate, or list (the read that chooses the next operation).
	Kind string
	Pod  string
	// Err is why the API server did not do it (during a fault, it may not answer).
	Err error
}

// load is a running load.
type load struct {
	ns   string
	opts loadOptions
	rand *rand.Rand
	stop chan struct{}
	done chan struct{}

	mu  sync.Mutex
	ops []loadOp
}

// podSeq numbers the load's pods across the suite, so that no name is reused.
var podSeq atomic.Int64

// startLoad starts a load in namespace ns; seed makes its choices reproducible.
func startLoad(ns string, opts loadOptions, seed uint64) *load {
	l := &load{ns: ns, opts: opts, rand: rand.New(rand.NewPCG(seed, 0x5eed)), stop: make(chan struct{}), done: make(chan struct{})}
	go l.run()
	DeferCleanup(l.Stop)
	return l
}

func (l *load) run() {
	defer close(l.done)
	defer GinkgoRecover()
	deadline := time.After(l.opts.MaxTime)
	tick := time.NewTicker(l.opts.Every)
	defer tick.Stop()
	for range l.opts.MaxOps {
		l.step()
		select {
		case <-l.stop:
			return
		case <-deadline:
			return
		case <-tick.C:
		}
	}
}

// step does one operation, chosen from the live load pods: create below half of MaxPods,
// delete or re-annotate at MaxPods, any of the three in between.
func (l *load) step() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var pods corev1.PodList
	if err := k8s.List(ctx, &pods, client.InNamespace(l.ns), client.HasLabels{labelLoad}); err != nil {
		l.record(loadOp{At: time.Now(), Kind: "list", Err: err})
		return
	}
	var live []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			live = append(live, p)
		}
	}
	kinds := []string{"create", "delete", "annotate"}
	switch {
	case len(live) < l.opts.MaxPods/2:
		kinds = kinds[:1]
	case len(live) >= l.opts.MaxPods:
		kinds = kinds[1:]
	}
	op := loadOp{At: time.Now(), Kind: kinds[l.rand.IntN(len(kinds))]}
	switch op.Kind {
	case "create":
		seq := podSeq.Add(1)
		ports := []string{portsHTTP, portsHTTPTCP}[seq%2]
		pod := managedPod(l.ns, fmt.Sprintf("load-%04d", seq), l.opts.Accounts[int(seq)%len(l.opts.Accounts)], ports)
		pod.Labels[labelLoad] = "true"
		op.Pod, op.Err = pod.Name, k8s.Create(ctx, pod)
	case "delete":
		pod := &live[l.rand.IntN(len(live))]
		op.Pod, op.Err = pod.Name, k8s.Delete(ctx, pod)
	case "annotate":
		pod := &live[l.rand.IntN(len(live))]
		ports := portsHTTPTCP
		if pod.Annotations[portspec.AnnotationPorts] == portsHTTPTCP {
			ports = portsHTTP
		}
		op.Pod, op.Err = pod.Name, setPorts(ctx, pod.Namespace, pod.Name, ports)
	}
	l.record(op)
}

func (l *load) record(op loadOp) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ops = append(l.ops, op)
}

// Stop stops the load (if it has not stopped by itself) and waits for it.
func (l *load) Stop() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	<-l.done
}

// Ops is what the load did so far.
func (l *load) Ops() []loadOp {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.ops)
}

// Done counts the operations the API server did.
func (l *load) Done() int {
	n := 0
	for _, op := range l.Ops() {
		if op.Err == nil && op.Kind != "list" {
			n++
		}
	}
	return n
}

// DoneAfter counts the operations the API server did after t.
func (l *load) DoneAfter(t time.Time) int {
	n := 0
	for _, op := range l.Ops() {
		if op.Err == nil && op.Kind != "list" && op.At.After(t) {
			n++
		}
	}
	return n
}

// DoneBetween counts the operations the API server did in [from, to).
func (l *load) DoneBetween(from, to time.Time) int {
	n := 0
	for _, op := range l.Ops() {
		if op.Err == nil && op.Kind != "list" && !op.At.Before(from) && op.At.Before(to) {
			n++
		}
	}
	return n
}

// Touched are the pods ("<namespace>/<name>") it created, deleted or re-annotated in [from, to],
// whether or not the API server answered (a request that timed out may have been done).
func (l *load) Touched(from, to time.Time) map[string]bool {
	out := map[string]bool{}
	for _, op := range l.Ops() {
		if op.Pod != "" && !op.At.Before(from) && !op.At.After(to) {
			out[l.ns+"/"+op.Pod] = true
		}
	}
	return out
}

// Summary says what it did: operations by kind, and how many the API server refused or did not
// answer.
func (l *load) Summary() string {
	count := map[string]int{}
	failed := 0
	for _, op := range l.Ops() {
		if op.Err != nil {
			failed++
			continue
		}
		count[op.Kind]++
	}
	return fmt.Sprintf("%d creations, %d deletions, %d annotation changes; %d requests failed (the fault)",
		count["create"], count["delete"], count["annotate"], failed)
}

// managedPod is a managed pod of ServiceAccount sa declaring ports, serving HTTP on 8080 and TCP on
// 9000 (tcpApp: "peer <caller>" there), quick to delete; opts add to it.
func managedPod(ns, name, sa, ports string, opts ...podOption) *corev1.Pod {
	return testPod(ns, name, append([]podOption{asManaged, withPorts(ports), withServiceAccount(sa), withContainers(tcpApp)}, opts...)...)
}

// setPorts changes pod ns/name's endpoint.aether.io/ports to ports (a merge patch).
func setPorts(ctx context.Context, ns, name, ports string) error {
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, portspec.AnnotationPorts, ports)
	return k8s.Patch(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, client.RawPatch(types.MergePatchType, patch))
}

// probe measures, over and over, how long a change takes to reach the mesh: it switches its
// pod's ports between portsHTTP and portsHTTPTCP and times how long until the pod's service's
// MeshService lists port 9000 (or no longer does). The change goes through the agent (the
// pod's MeshEndpoint) and the leading manager (the MeshService's status): a fault to either
// shows as a slow sample.
type probe struct {
	ns, pod, service string
	stop, done       chan struct{}

	mu      sync.Mutex
	samples []sample
}

// sample is one change: when it was asked for, and how long it took to show (or, while it
// has not, how long it has been waiting).
type sample struct {
	At      time.Time
	Took    time.Duration
	Written bool // the pod's patch was accepted
	Done    bool
}

// startProbe starts probing with pod ns/pod, of service's MeshService.
func startProbe(ns, pod, service string) *probe {
	p := &probe{ns: ns, pod: pod, service: service, stop: make(chan struct{}), done: make(chan struct{})}
	go p.run()
	DeferCleanup(p.Stop)
	return p
}

func (p *probe) run() {
	defer close(p.done)
	defer GinkgoRecover()
	withTCP := false
	for {
		withTCP = !withTCP
		ports := map[bool]string{true: portsHTTPTCP, false: portsHTTP}[withTCP]
		s := sample{At: time.Now()}
		p.add(s)
		for written := false; !s.Done; {
			select {
			case <-p.stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			if !written {
				written = setPorts(ctx, p.ns, p.pod, ports) == nil
				s.Written = written
			} else {
				ms := &meshv1alpha1.MeshService{}
				s.Done = k8s.Get(ctx, client.ObjectKey{Namespace: p.ns, Name: p.service}, ms) == nil &&
					slices.ContainsFunc(ms.Status.Ports, func(sp meshv1alpha1.ServicePort) bool { return sp.Port == 9000 }) == withTCP
			}
			cancel()
			s.Took = time.Since(s.At)
			p.update(s)
		}
		select { // a breath between two changes
		case <-p.stop:
			return
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func (p *probe) add(s sample) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.samples = append(p.samples, s)
}

func (p *probe) update(s sample) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.samples[len(p.samples)-1] = s
}

// Stop stops the probe and waits for it.
func (p *probe) Stop() {
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	<-p.done
}

// Samples are the changes so far (the last one maybe still waiting).
func (p *probe) Samples() []sample {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.samples)
}

// Waiting says where the change the probe waits on stands: whether its pod was written, and
// what the pod, its MeshEndpoint and its service's MeshService hold now, so that a probe that
// never completes names the component that lost the change.
func (p *probe) Waiting() string {
	samples := p.Samples()
	if len(samples) == 0 {
		return "the probe has asked for no change"
	}
	last := samples[len(samples)-1]
	if last.Done {
		return fmt.Sprintf("%d changes asked for, the last done in %s", len(samples), last.Took)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	key := func(name string) client.ObjectKey { return client.ObjectKey{Namespace: p.ns, Name: name} }
	pod, me, ms := &corev1.Pod{}, &meshv1alpha1.MeshEndpoint{}, &meshv1alpha1.MeshService{}
	podNow, meNow, msNow := "", "", ""
	if err := k8s.Get(ctx, key(p.pod), pod); err != nil {
		podNow = err.Error()
	} else {
		podNow = fmt.Sprintf("%q (resourceVersion %s)", pod.Annotations[portspec.AnnotationPorts], pod.ResourceVersion)
	}
	if err := k8s.Get(ctx, key(p.pod), me); err != nil {
		meNow = err.Error()
	} else {
		meNow = fmt.Sprintf("%v (resourceVersion %s)", me.Spec.Ports, me.ResourceVersion)
	}
	if err := k8s.Get(ctx, key(p.service), ms); err != nil {
		msNow = err.Error()
	} else {
		msNow = fmt.Sprintf("%v (resourceVersion %s)", ms.Status.Ports, ms.ResourceVersion)
	}
	return fmt.Sprintf("the change asked for at %s (pod patched: %t) has waited %s; now the pod's ports are %s, its MeshEndpoint's %s, the MeshService's %s",
		last.At.Format(time.TimeOnly), last.Written, last.Took.Round(time.Millisecond), podNow, meNow, msNow)
}

// DoneAfter counts the changes asked for after t that have shown.
func (p *probe) DoneAfter(t time.Time) int {
	n := 0
	for _, s := range p.Samples() {
		if s.Done && s.At.After(t) {
			n++
		}
	}
	return n
}

// DoneBetween counts the changes asked for in [from, to) that have shown.
func (p *probe) DoneBetween(from, to time.Time) int {
	n := 0
	for _, s := range p.Samples() {
		if s.Done && !s.At.Before(from) && s.At.Before(to) {
			n++
		}
	}
	return n
}

// Slowest is the longest a change waited that was waiting at some time in [from, to]: how long
// the fault held changes back.
func (p *probe) Slowest(from, to time.Time) time.Duration {
	var slowest time.Duration
	for _, s := range p.Samples() {
		if s.At.After(to) || s.At.Add(s.Took).Before(from) {
			continue
		}
		slowest = max(slowest, s.Took)
	}
	return slowest
}

// Median is the median time a change took to show before t: the mesh's pace without a fault.
func (p *probe) Median(before time.Time) time.Duration {
	var took []time.Duration
	for _, s := range p.Samples() {
		if s.Done && s.At.Add(s.Took).Before(before) {
			took = append(took, s.Took)
		}
	}
	if len(took) == 0 {
		return 0
	}
	slices.Sort(took)
	return took[len(took)/2]
}

// describe is a one-line account of the probe in [from, to].
func (p *probe) describe(from, to time.Time) string {
	return fmt.Sprintf("a change reached the MeshService in %s (median before the fault); during it, in up to %s",
		p.Median(from).Round(10*time.Millisecond), p.Slowest(from, to).Round(10*time.Millisecond))
}

// joinKeys is m's keys, sorted, comma-separated.
func joinKeys(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k, v := range m {
		keys = append(keys, fmt.Sprintf("%s: %d", k, v))
	}
	slices.Sort(keys)
	return strings.Join(keys, ", ")
}
