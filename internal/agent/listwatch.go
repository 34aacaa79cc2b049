// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"os"

	clientfeatures "k8s.io/client-go/features"
)

// watchListEnv is client-go's own switch for its WatchListClient feature: set, it decides.
const watchListEnv = "KUBE_FEATURE_" + string(clientfeatures.WatchListClient)

// ListThenWatch makes this process's informers list, then watch, rather than stream their initial
// state as watch events (client-go's WatchListClient, on by default since Kubernetes 1.35). The
// agent's view holds every MeshEndpoint of the cluster. Streamed, that initial state starts over
// from nothing each time the API server closes the stream, and the API server closes a watcher
// that falls behind: a CRD's watchers have the smallest buffer, so an agent starting while
// endpoints change (a rollout, a node pool scaling up, every agent of a fleet restarting) on a
// busy node may never finish. A list is one answer the API server does not close halfway, and a
// watch closed after it resumes from the last event seen. At 1 000 services × 10 endpoints with
// twenty agents starting together, streamed, one agent had not synced after 8 minutes while the
// API server closed 65 MeshEndpoint watchers.
//
// Called first in main, before any client reads the feature gates. KUBE_FEATURE_WatchListClient,
// when set, still decides.
func ListThenWatch() {
	if _, set := os.LookupEnv(watchListEnv); set {
		return
	}
	clientfeatures.ReplaceFeatureGates(listThenWatch{clientfeatures.FeatureGates()})
}

// listThenWatch is gates with WatchListClient off.
type listThenWatch struct{ clientfeatures.Gates }

func (g listThenWatch) Enabled(f clientfeatures.Feature) bool {
	return f != clientfeatures.WatchListClient && g.Gates.Enabled(f)
}
