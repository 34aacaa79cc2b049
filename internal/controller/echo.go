// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"reflect"
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// echoes remembers the resourceVersions the reconciler's writes returned, so that the watch
// event of such a write (its echo) does not bring the service back: the write was the outcome of
// the inputs that reconcile read, so the next one would find nothing to do, one batching window
// later. Any other change to the object carries a resourceVersion of its own and is reconciled as
// before. A reconcile may write one object twice (a MeshService created, then its status), so a
// few versions are kept per object; one whose echo never comes (the object was deleted) stays
// until the object's next write pushes it out.
type echoes struct {
	mu      sync.Mutex
	written map[echoKey][]string
}

// echoesKept is how many unechoed writes of one object are remembered.
const echoesKept = 4

type echoKey struct {
	kind string // the object's kind, from its Go type: the watch delivers the types the client writes
	key  types.NamespacedName
}

func keyOf(o client.Object) echoKey {
	return echoKey{kind: reflect.Indirect(reflect.ValueOf(o)).Type().Name(), key: client.ObjectKeyFromObject(o)}
}

// wrote records o as the reconciler's write (o as the API server answered it).
func (e *echoes) wrote(o client.Object) {
	rv := o.GetResourceVersion()
	if e == nil || rv == "" {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.written == nil {
		e.written = map[echoKey][]string{}
	}
	k := keyOf(o)
	kept := append(e.written[k], rv)
	e.written[k] = kept[max(0, len(kept)-echoesKept):]
}

// isEcho reports whether o is, to its resourceVersion, one of the reconciler's writes, and
// forgets that write.
func (e *echoes) isEcho(o client.Object) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	k := keyOf(o)
	kept := e.written[k]
	i := slices.Index(kept, o.GetResourceVersion())
	if i < 0 {
		return false
	}
	if kept = slices.Delete(kept, i, i+1); len(kept) == 0 {
		delete(e.written, k)
	} else {
		e.written[k] = kept
	}
	echoesSkipped.WithLabelValues(k.kind).Inc()
	return true
}

// forget drops what is remembered of o (deleted: no echo of it is coming).
func (e *echoes) forget(o client.Object) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.written, keyOf(o))
}

// echoesSkipped counts the watch events skipped as echoes of the manager's own writes.
var echoesSkipped = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "aether_controller_echoes_skipped_total",
	Help: "Watch events of the MeshService controller's own writes that brought no reconcile (the write was that reconcile's outcome), by kind.",
}, []string{"kind"})

func init() { ctrlmetrics.Registry.MustRegister(echoesSkipped) }

// withoutEchoes is h but for the create and update events that are echoes of e's writes.
func withoutEchoes(h handler.EventHandler, e *echoes) handler.EventHandler {
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, ev event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if !e.isEcho(ev.Object) {
				h.Create(ctx, ev, q)
			}
		},
		UpdateFunc: func(ctx context.Context, ev event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if !e.isEcho(ev.ObjectNew) {
				h.Update(ctx, ev, q)
			}
		},
		DeleteFunc: func(ctx context.Context, ev event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			e.forget(ev.Object)
			h.Delete(ctx, ev, q)
		},
		GenericFunc: h.Generic,
	}
}
