// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/testenv"
)

// TestInventoryCountsByHealth: aether_controller_meshendpoints follows an endpoint's
// status.health as it changes, and aether_controller_meshservices counts its service Ready once
// the controller said so; the sums match the API server's own lists.
func TestInventoryCountsByHealth(t *testing.T) {
	ctx := testContext(t)
	ns := namespaceWithSA(t, ctx, "inventory")
	gauge := func(name, label, value string) float64 {
		v, err := testenv.Gauge(name, label, value)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	unhealthy := gauge("aether_controller_meshendpoints", "health", "Unhealthy")
	ep := endpoint(t, ctx, ns, "inventory-0", "inventory", meshv1alpha1.HealthUnhealthy, 8080, 8080, "HTTP")
	testenv.Eventually(t, "the unhealthy endpoint counted", func() error {
		if got := gauge("aether_controller_meshendpoints", "health", "Unhealthy"); got != unhealthy+1 {
			return fmt.Errorf("Unhealthy: %v, want %v", got, unhealthy+1)
		}
		return nil
	})
	healthy := gauge("aether_controller_meshendpoints", "health", "Healthy")
	setHealth(t, ctx, ep, meshv1alpha1.HealthHealthy)
	testenv.Eventually(t, "the endpoint counted healthy, no longer unhealthy", func() error {
		h, u := gauge("aether_controller_meshendpoints", "health", "Healthy"), gauge("aether_controller_meshendpoints", "health", "Unhealthy")
		if h != healthy+1 || u != unhealthy {
			return fmt.Errorf("Healthy %v, Unhealthy %v; want %v, %v", h, u, healthy+1, unhealthy)
		}
		return nil
	})
	testenv.Eventually(t, "the counts match the API server's lists, the service Ready", func() error {
		ms, err := getMeshService(ctx, ns, "inventory")
		if err != nil {
			return err
		}
		if c := condition(ms.Status.Conditions, meshv1alpha1.ServiceConditionReady); c.Status != metav1.ConditionTrue {
			return fmt.Errorf("MeshService %s/inventory: Ready %q", ns, c.Status)
		}
		var services meshv1alpha1.MeshServiceList
		var endpoints meshv1alpha1.MeshEndpointList
		// What the manager's cache holds: everything outside the isolated namespaces.
		inSight := client.MatchingFieldsSelector{Selector: outsideIsolated()}
		if err := env.Client.List(ctx, &services, inSight); err != nil {
			return err
		}
		if err := env.Client.List(ctx, &endpoints, inSight); err != nil {
			return err
		}
		ready := 0
		for _, s := range services.Items {
			if condition(s.Status.Conditions, meshv1alpha1.ServiceConditionReady).Status == metav1.ConditionTrue {
				ready++
			}
		}
		svcs := gauge("aether_controller_meshservices", "ready", "True") + gauge("aether_controller_meshservices", "ready", "False") + gauge("aether_controller_meshservices", "ready", "Unknown")
		eps := 0.0
		for _, h := range []string{"Pending", "Healthy", "Unhealthy", "Draining", "Unknown"} {
			eps += gauge("aether_controller_meshendpoints", "health", h)
		}
		if svcs != float64(len(services.Items)) || eps != float64(len(endpoints.Items)) || gauge("aether_controller_meshservices", "ready", "True") != float64(ready) {
			return fmt.Errorf("counted %v services (%v Ready), %v endpoints; the API server lists %d (%d Ready), %d",
				svcs, gauge("aether_controller_meshservices", "ready", "True"), eps, len(services.Items), ready, len(endpoints.Items))
		}
		return nil
	})
}
