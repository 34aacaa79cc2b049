// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"os"
	"testing"

	clientfeatures "k8s.io/client-go/features"
)

// fixedGates answers every feature with on.
type fixedGates struct{ on bool }

func (g fixedGates) Enabled(clientfeatures.Feature) bool { return g.on }

// TestListThenWatch: the gates the agent installs turn WatchListClient off and leave every other
// feature as it was; with KUBE_FEATURE_WatchListClient set, ListThenWatch leaves the gates alone
// (client-go's variable decides); unset, the process's informers list, then watch.
func TestListThenWatch(t *testing.T) {
	gates := listThenWatch{fixedGates{on: true}}
	if gates.Enabled(clientfeatures.WatchListClient) {
		t.Error("WatchListClient is on under listThenWatch")
	}
	if !gates.Enabled(clientfeatures.InformerResourceVersion) {
		t.Error("InformerResourceVersion, on in the gates wrapped, is off under listThenWatch")
	}
	if (listThenWatch{fixedGates{on: false}}).Enabled(clientfeatures.InformerResourceVersion) {
		t.Error("InformerResourceVersion, off in the gates wrapped, is on under listThenWatch")
	}

	before := clientfeatures.FeatureGates()
	t.Setenv(watchListEnv, "true")
	ListThenWatch()
	if after := clientfeatures.FeatureGates(); after != before {
		t.Errorf("with %s set, ListThenWatch replaced the gates (%T)", watchListEnv, after)
	}
	if err := os.Unsetenv(watchListEnv); err != nil {
		t.Fatal(err)
	}
	ListThenWatch()
	if clientfeatures.FeatureGates().Enabled(clientfeatures.WatchListClient) {
		t.Error("after ListThenWatch, client-go's WatchListClient is still on: informers stream their initial state")
	}
}
