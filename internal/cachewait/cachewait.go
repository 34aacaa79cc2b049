// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Package cachewait bounds how long a read from the informer cache waits for the cache to show
// this process's own earlier writes (controller-runtime's read-your-writes consistency).
//
// controller-runtime makes such a read wait until the cache has seen an event at least as new as
// the process's last write of that object (a Get) or of that kind (a List), and it learns how new
// the cache is only from the objects its events carry: not from a list's resourceVersion, not
// from bookmarks. A write whose event the cache never shows then holds every later read of that
// object, and every List of its kind, until some other object of the kind the cache holds
// changes, without limit. It happens: an informer whose watch broke (an API server restart, etcd
// compacted) relists, and an object the process wrote and someone else deleted during the gap is
// in neither the list nor any event. On a node with few endpoints, the node agent's four pod
// workers and its prober all waited on such writes; nothing else changed the node's endpoints,
// and the agent stopped registering pods for good.
//
// Here a read waits at most Bound; then it reads the cache as it is, as a client without the
// consistency would, and counts that (aether_cache_waits_abandoned_total). The cost of reading
// an older object is the one the consistency was there to save: a write from it may lose a
// conflict and be retried. The writes that follow carry newer resourceVersions, and their events
// release every wait still pending.
package cachewait

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Bound is how long a read waits for the cache to show this process's own writes. A healthy
// watch delivers a write's event in milliseconds (seconds on a loaded API server); a wait longer
// than this is one that may never end.
const Bound = 5 * time.Second

var waitsAbandoned = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "aether_cache_waits_abandoned_total",
	Help: "Reads from the informer cache that waited the bound for the cache to show this process's own earlier writes, then read the cache as it was, by operation (get, list).",
}, []string{"operation"})

func init() { ctrlmetrics.Registry.MustRegister(waitsAbandoned) }

// NewClient is a client.NewClientFunc for a manager's options: client.New, with its cache reads
// bounded by Bound.
func NewClient(cfg *rest.Config, opts client.Options) (client.Client, error) {
	c, err := client.New(cfg, opts)
	if err != nil {
		return nil, err
	}
	return New(c, Bound), nil
}

// New wraps c so that a Get or List waits at most bound for the cache to show c's own writes.
func New(c client.Client, bound time.Duration) client.Client {
	return &boundedClient{Client: c, bound: bound}
}

type boundedClient struct {
	client.Client
	bound time.Duration
}

func (c *boundedClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return c.bounded(ctx, "get", func(ctx context.Context, wait bool) error {
		if !wait {
			opts = append(slices.Clip(opts), client.DisableReadYourWritesConsistency)
		}
		return c.Client.Get(ctx, key, obj, opts...)
	})
}

func (c *boundedClient) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return c.bounded(ctx, "list", func(ctx context.Context, wait bool) error {
		if !wait {
			opts = append(slices.Clip(opts), client.DisableReadYourWritesConsistency)
		}
		return c.Client.List(ctx, list, opts...)
	})
}

// bounded runs read, waiting for the cache, within c.bound; if the bound, and not ctx, ended
// it, it reads again without waiting.
func (c *boundedClient) bounded(ctx context.Context, operation string, read func(ctx context.Context, wait bool) error) error {
	waiting, cancel := context.WithTimeout(ctx, c.bound)
	defer cancel()
	err := read(waiting, true)
	if err == nil || ctx.Err() != nil || waiting.Err() == nil || !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	waitsAbandoned.WithLabelValues(operation).Inc()
	return read(ctx, false)
}
