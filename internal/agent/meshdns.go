// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/meshdns"
	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/portspec"
)

// DNSOptions turn on the mesh DNS (internal/meshdns), with capture: the agent serves it in each
// captured pod's network namespace whose DNS is the mesh's (model.LocalPod.MeshDNS), and the
// pod's capture redirects its DNS queries there. Its answers for mesh names come from the View's
// MeshServices, through an informer handler: a VIP that changes is answered at once.
type DNSOptions struct {
	// Rate and Burst are each pod's query rate (meshdns.Config); the defaults if zero.
	Rate  float64
	Burst int
	// CacheSize bounds each pod's cache of forwarded answers; meshdns.DefaultCacheSize if zero.
	CacheSize int
}

// dnsQueries counts the mesh DNS's queries by outcome; dnsDuration is how long each took.
var (
	dnsQueries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "aether_agent_dns_queries_total",
		Help: "DNS queries the mesh DNS answered in the node's meshed pods, by outcome: mesh (a mesh name, from the MeshServices), " +
			"nxdomain (a name under the mesh domain that is no service's, never forwarded), forwarded (to the pod's resolver, or " +
			"from the cache), upstream_failure (the resolver did not answer: SERVFAIL), refused (over the pod's rate).",
	}, []string{"outcome"})
	dnsDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "aether_agent_dns_query_duration_seconds",
		Help:    "Time from a DNS query's arrival at the mesh DNS to its answer, by outcome (as aether_agent_dns_queries_total).",
		Buckets: []float64{25e-6, 50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3, 100e-3, 250e-3, 1, 3},
	}, []string{"outcome"})
)

func init() {
	ctrlmetrics.Registry.MustRegister(dnsQueries, dnsDuration)
	// Every series exported at zero, so an alert or a dashboard sees it before the first query.
	for _, o := range meshdns.Outcomes() {
		dnsQueries.WithLabelValues(o)
		dnsDuration.WithLabelValues(o)
	}
}

// observeDNS records one query in the metrics.
func observeDNS(outcome string, took time.Duration) {
	dnsQueries.WithLabelValues(outcome).Inc()
	dnsDuration.WithLabelValues(outcome).Observe(took.Seconds())
}

// dnsServers are the mesh DNS servers of the node's pods, by pod UID, and the table they share.
type dnsServers struct {
	table *meshdns.Table
	cfg   meshdns.Config
	log   logr.Logger

	mu      sync.Mutex
	servers map[types.UID]dnsServer
	// failed is, per pod, the last error its server's start was told with (logged once).
	failed map[types.UID]string
}

type dnsServer struct {
	netns  string
	server *meshdns.Server
}

func newDNSServers(o DNSOptions, domain string, log logr.Logger) *dnsServers {
	table := meshdns.NewTable(domain)
	return &dnsServers{table: table, log: log.WithName("dns"), servers: map[types.UID]dnsServer{}, failed: map[types.UID]string{},
		cfg: meshdns.Config{Table: table, Mark: model.ProxySocketMark, Rate: o.Rate, Burst: o.Burst, CacheSize: o.CacheSize, Observe: observeDNS}}
}

// wantsMeshDNS reports whether pod's DNS is the mesh's: its dnsPolicy is not None (its resolv.conf
// is then the pod's own business) and it does not opt out (aether.io/mesh-dns: "false", read by
// internal/portspec; annotations that do not parse keep the default: the pod is refused
// registration anyway, with an Event).
func wantsMeshDNS(pod *corev1.Pod) bool {
	if pod.Spec.DNSPolicy == corev1.DNSNone {
		return false
	}
	spec, err := portspec.Parse(pod.Annotations)
	return err != nil || !spec.NoMeshDNS
}

// ensure serves pod uid's namespace, if it does not already: called after its capture was
// programmed. A server that cannot start is logged (once per error) and retried on the next sync.
func (d *dnsServers) ensure(uid types.UID, pod, netns string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if s, ok := d.servers[uid]; ok {
		if s.netns == netns {
			return
		}
		s.server.Close()
		delete(d.servers, uid)
	}
	server, err := meshdns.Serve(netns, d.cfg)
	if err != nil {
		if d.failed[uid] != err.Error() {
			d.failed[uid] = err.Error()
			d.log.Error(err, "Could not serve the mesh DNS in a pod; its DNS queries fail until it does, retrying on the next sync", "pod", pod, "netns", netns)
		}
		return
	}
	delete(d.failed, uid)
	d.servers[uid] = dnsServer{netns: netns, server: server}
}

// stop stops pod uid's server, if one runs (the pod left, or its DNS is no longer the mesh's).
func (d *dnsServers) stop(uid types.UID) {
	d.mu.Lock()
	s, ok := d.servers[uid]
	delete(d.servers, uid)
	delete(d.failed, uid)
	d.mu.Unlock()
	if ok {
		s.server.Close()
	}
}

// stopAll stops every server (the agent is stopping).
func (d *dnsServers) stopAll() {
	d.mu.Lock()
	servers := d.servers
	d.servers = map[types.UID]dnsServer{}
	d.mu.Unlock()
	for _, s := range servers {
		s.server.Close()
	}
}

// tableHandler keeps the table in step with the View's MeshServices: each add, update and delete
// sets or removes the service's name, as the informer delivers it (no rebuild, no debounce).
func (d *dnsServers) tableHandler() toolscache.ResourceEventHandler {
	set := func(obj any) {
		if ms, ok := obj.(*meshv1alpha1.MeshService); ok {
			d.table.Set(ms.Namespace, ms.Name, []string{ms.Status.VIP})
		}
	}
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    set,
		UpdateFunc: func(_, obj any) { set(obj) },
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if ms, ok := obj.(*meshv1alpha1.MeshService); ok {
				d.table.Delete(ms.Namespace, ms.Name)
			}
		},
	}
}

// watchMeshServices feeds the table from the View's MeshService informer.
func (d *dnsServers) watchMeshServices(ctx context.Context, v *View) error {
	informer, err := v.cache.GetInformer(ctx, &meshv1alpha1.MeshService{})
	if err != nil {
		return fmt.Errorf("watching MeshServices for the mesh DNS: %w", err)
	}
	if _, err := informer.AddEventHandler(d.tableHandler()); err != nil {
		return fmt.Errorf("watching MeshServices for the mesh DNS: %w", err)
	}
	return nil
}
