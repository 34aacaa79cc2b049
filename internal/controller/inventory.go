// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
)

// The mesh's objects by health, counted from the manager's cache at each scrape: what a dashboard
// shows as "services and endpoints by health". Every replica counts the same cluster-wide cache
// (followers' caches run too), so aggregate replicas with max, not sum.
var (
	meshServicesDesc = prometheus.NewDesc("aether_controller_meshservices",
		"MeshServices in the cluster by their Ready condition's status: True, False, or Unknown (not reconciled yet). Every manager replica reports the same counts.",
		[]string{"ready"}, nil)
	meshEndpointsDesc = prometheus.NewDesc("aether_controller_meshendpoints",
		"MeshEndpoints in the cluster by status.health, as their node agent reports it: Pending, Healthy, Unhealthy, Draining, or Unknown (none yet). Every manager replica reports the same counts.",
		[]string{"health"}, nil)
)

// inventoryCollector counts from the cache of a running manager whose MeshService controller was
// set up (the oldest still running: one in the binary; several in a test process, which start
// and stop their own). Without one (the agent's process) it exports nothing.
type inventoryCollector struct {
	mu      sync.Mutex
	readers []*client.Reader
}

var inventory = &inventoryCollector{}

// listTimeout bounds each List of a scrape; Prometheus's default scrape timeout is 10 s.
const listTimeout = 5 * time.Second

func init() { ctrlmetrics.Registry.MustRegister(inventory) }

// countWhileRunning is a runnable of every replica, leader or not (their caches all run), that
// makes the collector count from r while the manager runs.
type countWhileRunning struct{ r client.Reader }

func (c countWhileRunning) NeedLeaderElection() bool { return false }

func (c countWhileRunning) Start(ctx context.Context) error {
	p := &c.r
	inventory.mu.Lock()
	inventory.readers = append(inventory.readers, p)
	inventory.mu.Unlock()
	<-ctx.Done()
	inventory.mu.Lock()
	inventory.readers = slices.DeleteFunc(inventory.readers, func(q *client.Reader) bool { return q == p })
	inventory.mu.Unlock()
	return nil
}

func (c *inventoryCollector) reader() client.Reader {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.readers) == 0 {
		return nil
	}
	return *c.readers[0]
}

func (c *inventoryCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- meshServicesDesc
	ch <- meshEndpointsDesc
}

// Collect lists both kinds from the cache, without copying them (read only), and exports every
// label value, at zero too, so an empty state is a series and not a gap.
func (c *inventoryCollector) Collect(ch chan<- prometheus.Metric) {
	r := c.reader()
	if r == nil {
		return
	}
	// Bounded: a kind whose informer cannot sync (its RBAC removed) must not hang the scrape.
	ctx, cancel := context.WithTimeout(context.Background(), listTimeout)
	defer cancel()
	var services meshv1alpha1.MeshServiceList
	if err := r.List(ctx, &services, client.UnsafeDisableDeepCopy); err == nil {
		ready := map[string]float64{string(metav1.ConditionTrue): 0, string(metav1.ConditionFalse): 0, string(metav1.ConditionUnknown): 0}
		for i := range services.Items {
			status := string(metav1.ConditionUnknown)
			if cond := apimeta.FindStatusCondition(services.Items[i].Status.Conditions, meshv1alpha1.ServiceConditionReady); cond != nil {
				status = string(cond.Status)
			}
			ready[status]++
		}
		for status, n := range ready {
			ch <- prometheus.MustNewConstMetric(meshServicesDesc, prometheus.GaugeValue, n, status)
		}
	}
	var endpoints meshv1alpha1.MeshEndpointList
	if err := r.List(ctx, &endpoints, client.UnsafeDisableDeepCopy); err == nil {
		const unknown = "Unknown"
		health := map[string]float64{unknown: 0}
		for _, h := range []meshv1alpha1.Health{meshv1alpha1.HealthPending, meshv1alpha1.HealthHealthy, meshv1alpha1.HealthUnhealthy, meshv1alpha1.HealthDraining} {
			health[string(h)] = 0
		}
		for i := range endpoints.Items {
			h := string(endpoints.Items[i].Status.Health)
			if _, known := health[h]; !known || h == "" {
				h = unknown
			}
			health[h]++
		}
		for h, n := range health {
			ch <- prometheus.MustNewConstMetric(meshEndpointsDesc, prometheus.GaugeValue, n, h)
		}
	}
}
