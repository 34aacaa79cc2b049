// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package invariant

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/agent"
	"github.com/aether-mesh/aether-operator/internal/controller"
	"github.com/aether-mesh/aether-operator/internal/routes"
)

// subresourceStatus is the status subresource, as managedFields name it.
const subresourceStatus = "status"

// writer is a field manager and the part of an object it may write: the main resource
// ("", metadata and spec), its status subresource ("status"), or both (any).
type writer struct {
	manager string
	any     bool
	part    string
}

func (w writer) allows(entry metav1.ManagedFieldsEntry) bool {
	return entry.Manager == w.manager && (w.any || entry.Subresource == w.part)
}

func (w writer) String() string {
	switch {
	case w.any:
		return w.manager
	case w.part == "":
		return w.manager + " (metadata and spec)"
	}
	return w.manager + " (" + w.part + ")"
}

// The writers of each mesh-written kind, from the code's own field managers. The agent writes
// MeshEndpoints, spec and status (registration, health); the controller writes their status
// (Verified), and MeshServices and generated Services whole. Nobody else writes any of them.
var (
	endpointWriters = []writer{{manager: agent.FieldManager, any: true}, {manager: controller.FieldManager, part: subresourceStatus}}
	serviceWriters  = []writer{{manager: controller.FieldManager, any: true}}
)

// checkFieldManagers: the mesh-written objects were written by their writers only, and the
// controller wrote nothing of a route but its status (GitOps tools own the rest and must see
// no drift). Others may write a route's status: every gateway controller has entries there.
func checkFieldManagers(s snapshot) []Violation {
	var out []Violation
	for i := range s.endpoints {
		out = append(out, foreignWriters(kindMeshEndpoint, &s.endpoints[i], endpointWriters)...)
	}
	for i := range s.services {
		out = append(out, foreignWriters(kindMeshService, &s.services[i], serviceWriters)...)
	}
	for _, svc := range s.kubeServices {
		if controlledByMeshService(svc) {
			out = append(out, foreignWriters(kindService, svc, serviceWriters)...)
		}
	}
	for _, route := range s.routes {
		out = append(out, controllerOutsideStatus(route)...)
	}
	return out
}

// foreignWriters reports each managedFields entry of obj no writer allows.
func foreignWriters(kind string, obj client.Object, writers []writer) []Violation {
	var out []Violation
	allowed := make([]string, len(writers))
	for i, w := range writers {
		allowed[i] = w.String()
	}
	for _, entry := range obj.GetManagedFields() {
		if slices.ContainsFunc(writers, func(w writer) bool { return w.allows(entry) }) {
			continue
		}
		out = append(out, Violation{Check: CheckFieldManagers, Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName(),
			Field: "metadata.managedFields[" + entry.Manager + "]", Want: "only " + strings.Join(allowed, ", "), Got: describeEntry(entry)})
	}
	return out
}

// controllerOutsideStatus reports a route's managedFields entry of the controller outside status.
func controllerOutsideStatus(route client.Object) []Violation {
	kind := route.GetObjectKind().GroupVersionKind().Kind
	var out []Violation
	for _, entry := range route.GetManagedFields() {
		if entry.Manager == controller.FieldManager && entry.Subresource != subresourceStatus {
			out = append(out, Violation{Check: CheckFieldManagers, Kind: kind, Namespace: route.GetNamespace(), Name: route.GetName(),
				Field: "metadata.managedFields[" + entry.Manager + "]", Want: controller.FieldManager + " writing " + string(routes.ControllerName) + "'s status entries only",
				Got: describeEntry(entry)})
		}
	}
	return out
}

// describeEntry is a managedFields entry in one line: who, how, where and the top fields.
func describeEntry(entry metav1.ManagedFieldsEntry) string {
	part := entry.Subresource
	if part == "" {
		part = "main resource"
	}
	var top []string
	if entry.FieldsV1 != nil {
		var fields map[string]json.RawMessage
		if json.Unmarshal(entry.FieldsV1.GetRawBytes(), &fields) == nil {
			for f := range fields {
				top = append(top, f)
			}
			slices.Sort(top)
		}
	}
	return fmt.Sprintf("%s %s of the %s: %s", entry.Manager, entry.Operation, part, strings.Join(top, ","))
}

// controlledByMeshService reports whether svc's controller is a MeshService (a generated
// Service; a user's Service copying the label is never the mesh's to judge).
func controlledByMeshService(svc *corev1.Service) bool {
	ref := metav1.GetControllerOfNoCopy(svc)
	return ref != nil && ref.Kind == "MeshService" && strings.HasPrefix(ref.APIVersion, meshv1alpha1.GroupVersion.Group+"/")
}
