// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package plugin

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/portspec"
)

// fixtureVIPs are the cluster IPs of the fixture's generated Services (in envtest's Service range).
var fixtureVIPs = map[string]string{"payments": "10.0.0.20", "web": "10.0.0.21"}

// agentNamespace is where the fixture's node agents run.
const agentNamespace = "aether-system"

// createFromFixture writes what dial --from reads beside the services: a node agent's pod on
// node-a with no --capture-mode (the default, surface) and one on node-b with --capture-mode=all;
// and in namespace shop, pods of ServiceAccount client: on node-a one with the node's mode, one
// scoped by its annotation, one excluding port 9000, one with an invalid mode annotation, one not
// in the mesh (no label), and on node-b one with that node's mode.
func createFromFixture(ctx context.Context, c client.Client) error {
	objects := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: agentNamespace}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: agentNamespace, Name: "aether-agent"}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: fixtureNamespace, Name: "client"}},
		agentPod("aether-agent-a", "node-a", fixtureImage, "--node-name=node-a", "--metrics-bind-address=:19090"),
		agentPod("aether-agent-b", "node-b", fixtureOldImage, "--node-name=node-b", "--capture-mode", "all"),
		managerPod(),
		clientPod("client", "node-a", nil, true),
		clientPod("client-scoped", "node-a", map[string]string{model.AnnotationCaptureMode: string(model.CaptureScoped)}, true),
		clientPod("client-excluded", "node-a", map[string]string{portspec.AnnotationExcludeOutboundPorts: "9000"}, true),
		clientPod("client-bad-mode", "node-a", map[string]string{model.AnnotationCaptureMode: "most"}, true),
		clientPod("outsider", "node-a", nil, false),
		clientPod("client-b", "node-b", nil, true),
	}
	for _, o := range objects {
		if err := c.Create(ctx, o); err != nil {
			return fmt.Errorf("creating %T %s: %w", o, o.GetName(), err)
		}
	}
	// The manager's pod is ready; the agents' pods are not (no kubelet reports them).
	manager := managerPod()
	if err := c.Get(ctx, client.ObjectKeyFromObject(manager), manager); err != nil {
		return err
	}
	manager.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	return c.Status().Update(ctx, manager)
}

// fixtureImage is the operator image the fixture's manager and first agent run; the second agent
// runs fixtureOldImage, as during an upgrade.
const (
	fixtureImage    = "registry.invalid/aether/operator:v9.9.9"
	fixtureOldImage = "registry.invalid/aether/operator:v9.9.8"
)

func agentPod(name, node, image string, args ...string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: agentNamespace, Name: name, Labels: map[string]string{"app.kubernetes.io/name": AgentLabel}},
		Spec: corev1.PodSpec{NodeName: node, ServiceAccountName: "aether-agent", AutomountServiceAccountToken: new(false),
			Containers: []corev1.Container{{Name: "agent", Image: image, Command: []string{"/agent"}, Args: args}}},
	}
}

func managerPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: agentNamespace, Name: "aether-manager-0",
			Labels: map[string]string{"app.kubernetes.io/name": "aether-operator", "control-plane": "controller-manager"}},
		Spec: corev1.PodSpec{NodeName: "node-a", ServiceAccountName: "aether-agent", AutomountServiceAccountToken: new(false),
			Containers: []corev1.Container{{Name: "kube-rbac-proxy", Image: "sidecar"}, {Name: "manager", Image: fixtureImage}}},
	}
}

func clientPod(name, node string, annotations map[string]string, meshed bool) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: fixtureNamespace, Name: name, Annotations: annotations},
		Spec: corev1.PodSpec{NodeName: node, ServiceAccountName: "client", AutomountServiceAccountToken: new(false),
			Containers: []corev1.Container{{Name: "app", Image: "app"}}},
	}
	if meshed {
		pod.Labels = map[string]string{portspec.LabelManaged: "true"}
	}
	return pod
}
