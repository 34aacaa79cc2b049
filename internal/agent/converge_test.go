// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"fmt"
	"slices"
	"strconv"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/conditions"
	"github.com/aether-mesh/aether-operator/internal/portspec"
	"github.com/aether-mesh/aether-operator/internal/testenv"
)

// TestForeignSpecEditsConverge: whatever another writer (kubectl, a field manager that is not
// the agent's) changes in an agent-owned MeshEndpoint's spec, added fields included, the agent
// writes it back to the pod's registration; and a converged endpoint is not rewritten when an
// agent (restarted) reconciles it again.
func TestForeignSpecEditsConverge(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t, ctx)
	node, restart := dedicatedAgent(t, ns)
	ip := newPodIP()
	port, _ := listenTCP(t, ip)
	createPod(t, ctx, ns, "owned", node, ip, true, map[string]string{
		portspec.AnnotationProtocol: "tcp", portspec.AnnotationPort: strconv.Itoa(port),
		portspec.AnnotationPorts: strconv.Itoa(port) + ",9000=tcp", portspec.AnnotationWeight: "100",
		portspec.AnnotationMetadataPrefix + "version": "v1",
	})
	healthIs(t, ns, "owned", meshv1alpha1.HealthHealthy)
	registered := registeredEndpoint(t, ctx, ns, "owned", "Registered=True").Spec

	secondary := slices.IndexFunc(registered.Ports, func(p meshv1alpha1.PortProtocol) bool { return p.Port == 9000 })
	for _, edit := range []struct {
		name, patchType, patch string
	}{
		{"add a port", "json", `[{"op":"add","path":"/spec/ports/-","value":{"port":65000,"protocol":"HTTP"}}]`},
		{"add a metadata key", "merge", `{"spec":{"metadata":{"intruder":"yes"}}}`},
		{"change the weight", "merge", `{"spec":{"weight":7}}`},
		{"change the address", "merge", `{"spec":{"address":"127.0.0.254"}}`},
		{"remove a port", "json", `[{"op":"remove","path":"/spec/ports/` + strconv.Itoa(secondary) + `"}]`},
		{"remove the metadata", "json", `[{"op":"remove","path":"/spec/metadata"}]`},
		{"add a locality", "merge", `{"spec":{"locality":{"region":"elsewhere"}}}`},
	} {
		t.Run(edit.name, func(t *testing.T) {
			ctx := testContext(t)
			// kubectl patch writes as its own field manager, kubectl-patch.
			out, stderr, err := env.Kubectl(ctx, "patch", "meshendpoint", "owned", "-n", ns, "--type", edit.patchType, "-p", edit.patch, "-o", "jsonpath={.metadata.resourceVersion}")
			if err != nil {
				t.Fatalf("kubectl patch: %v: %s", err, stderr)
			}
			testenv.Eventually(t, "the spec back to the pod's registration", func() error {
				ep, err := getEndpoint(ctx, ns, "owned")
				if err != nil {
					return err
				}
				if ep.ResourceVersion == out {
					return fmt.Errorf("resourceVersion %s: not rewritten yet", out)
				}
				if fmt.Sprint(ep.Spec) != fmt.Sprint(registered) {
					return fmt.Errorf("spec\n %+v\nwant\n %+v", ep.Spec, registered)
				}
				return nil
			})
		})
	}

	// Converged, status included (the moved address may have cost a probe): a reconcile of it
	// writes nothing.
	var converged *meshEndpoint
	testenv.Eventually(t, "the status converged on the last generation", func() (err error) {
		if converged, err = getEndpoint(ctx, ns, "owned"); err != nil {
			return err
		}
		c := conditions.Find(converged.Status.Conditions, meshv1alpha1.EndpointConditionRegistered)
		if converged.Status.Health != meshv1alpha1.HealthHealthy || converged.Status.ObservedGeneration != converged.Generation ||
			c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != converged.Generation {
			return fmt.Errorf("generation %d, status %+v", converged.Generation, converged.Status)
		}
		// The MeshService controller of this suite writes its Verified verdict on the same
		// status: wait for it too, so the only writer left to watch is the agent.
		if v := conditions.Find(converged.Status.Conditions, meshv1alpha1.EndpointConditionVerified); v == nil ||
			v.Status != metav1.ConditionTrue || v.ObservedGeneration != converged.Generation {
			return fmt.Errorf("Verified %+v on generation %d", v, converged.Generation)
		}
		return nil
	})
	controller := restart()
	// The node's only pod: one finished reconcile of the new agent is one of that pod.
	testenv.Eventually(t, "the restarted agent reconciled the pod", func() error {
		if n := reconciles(t, controller); n < 1 {
			return fmt.Errorf("%v reconciles", n)
		}
		return nil
	})
	after, err := getEndpoint(ctx, ns, "owned")
	if err != nil {
		t.Fatal(err)
	}
	if after.ResourceVersion != converged.ResourceVersion {
		t.Errorf("a converged MeshEndpoint was rewritten: resourceVersion %s → %s\nspec %+v\nstatus %+v",
			converged.ResourceVersion, after.ResourceVersion, after.Spec, after.Status)
	}
}
