// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aether-mesh/aether-operator/internal/testenv"
	"github.com/aether-mesh/aether-operator/internal/xdsserver/xdstest"
)

// TestNodeSocketServesTheEnvoyPodOnly: the agent tells the node's Envoy on its node's socket by the
// pod its cache holds for the caller's pod UID (xdsserver.NodeEnvoy, callerPod). A process of a pod
// of its node in the node Envoy's namespace, with its label, is served the node's configuration; a
// process of a pod of its node in another namespace, labelled the same, is refused with
// PermissionDenied naming its pod; so is one of a pod of the same namespace and label on another
// node, which the agent does not know.
func TestNodeSocketServesTheEnvoyPodOnly(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t, ctx)
	tenantNS, err := env.Namespace(ctx, "tenant")
	if err != nil {
		t.Fatal(err)
	}
	a := startXDSAgent(t, ns)
	pod := func(namespace, name, node string) *corev1.Pod {
		return createRunning(t, ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{testEnvoyLabel: testEnvoyLabelValue}},
			Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "envoy", Image: "registry.example/envoy:1"}}},
		}, newPodIP())
	}
	envoy, tenant, elsewhere := pod(ns, "envoy-x7k2p", a.node), pod(tenantNS, "web-0", a.node), pod(ns, "envoy-q8m4z", "node-elsewhere")

	a.actAs(envoy)
	testenv.Eventually(t, "the node Envoy's pod served on the node's socket", func() error { return a.servedOnNodeSocket(ctx) })

	a.actAs(tenant)
	testenv.Eventually(t, "a tenant pod labelled as the node Envoy's refused", func() error {
		err := a.servedOnNodeSocket(ctx)
		if err == nil || !strings.Contains(err.Error(), "code = PermissionDenied") ||
			!strings.Contains(err.Error(), fmt.Sprintf("runs in pod %s/%s (UID %s), which is not the node's Envoy", tenantNS, tenant.Name, tenant.UID)) {
			return fmt.Errorf("the tenant: %v, want PermissionDenied naming its pod", err)
		}
		return nil
	})

	a.actAs(elsewhere)
	if err := a.servedOnNodeSocket(ctx); err == nil || !strings.Contains(err.Error(), "code = PermissionDenied") ||
		!strings.Contains(err.Error(), "runs in no pod of this node the agent knows") {
		t.Errorf("a pod of another node: %v, want PermissionDenied saying the agent knows no such pod of its node", err)
	}
}

// servedOnNodeSocket is nil once a client of the test's processes, as they act now (actAs), is
// served the node's listeners on the node's socket, and otherwise why not (the refusal).
func (a *xdsAgent) servedOnNodeSocket(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, err := xdstest.Dial(ctx, a.address, a.node)
	if err != nil {
		return err
	}
	defer c.Close()
	return c.Await(ctx, func(s xdstest.State) error {
		if s.Versions[xdstest.Listeners] == "" {
			return errors.New("no listeners accepted yet")
		}
		return nil
	})
}
