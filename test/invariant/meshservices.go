// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package invariant

import (
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1 "github.com/aether-mesh/aether-operator/api/config/v1"
	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/controller"
	"github.com/aether-mesh/aether-operator/internal/meshservice"
)

const (
	kindMeshService = "MeshService"
	kindService     = "Service"
)

// checkMeshServices: each service the controller keeps a MeshService for has one, holding the
// status a fresh translation of its verified endpoints gives, and its generated Service.
func checkMeshServices(s snapshot, opts Options, now time.Time) []Violation {
	counted := map[client.ObjectKey][]meshv1alpha1.MeshEndpoint{}
	for i := range s.endpoints {
		ep := &s.endpoints[i]
		if s.verdict[client.ObjectKeyFromObject(ep)].Status == metav1.ConditionTrue {
			key := client.ObjectKey{Namespace: ep.Namespace, Name: ep.Spec.ServiceName}
			counted[key] = append(counted[key], *ep)
		}
	}
	var out []Violation
	kept := map[client.ObjectKey]bool{}
	for i := range s.services {
		ms := &s.services[i]
		key := client.ObjectKeyFromObject(ms)
		kept[key] = true
		if !s.accounts[key] && len(counted[key]) == 0 {
			out = append(out, Violation{Check: CheckMeshServices, Kind: kindMeshService, Namespace: ms.Namespace, Name: ms.Name, Field: FieldObject,
				Want: "none: neither its ServiceAccount nor any verified endpoint exists, so the controller removes it", Got: "a MeshService"})
			continue
		}
		out = append(out, checkMeshService(ms, s.kubeServices[key], counted[key], s.pods, s.policies, opts, now)...)
	}
	for key, eps := range counted {
		if !kept[key] {
			out = append(out, Violation{Check: CheckMeshServices, Kind: kindMeshService, Namespace: key.Namespace, Name: key.Name, Field: FieldObject,
				Want: fmt.Sprintf("a MeshService counting %d verified endpoints", len(eps)), Got: "none"})
		}
	}
	return out
}

// checkMeshService compares ms and live, the Service of its name (nil when none exists), with
// the controller's translation of counted, its verified endpoints.
func checkMeshService(ms *meshv1alpha1.MeshService, live *corev1.Service, counted []meshv1alpha1.MeshEndpoint, pods []corev1.Pod,
	policies []configv1.AccessPolicy, opts Options, now time.Time) []Violation {
	out, err := controller.Translate(ms, counted, live, pods, policies, opts.MeshDomain, opts.Issuer)
	if err != nil {
		return []Violation{{Check: CheckMeshServices, Kind: kindMeshService, Namespace: ms.Namespace, Name: ms.Name, Field: subresourceStatus,
			Want: "a translation of its endpoints", Got: "the translation failed: " + err.Error()}}
	}
	var found []Violation
	if out.Service != nil {
		var vip string
		vip, found = checkService(ms, live, out)
		out.Status.VIP = vip
	}
	want := controller.StampStatus(ms.Status, out.Status, ms.Generation, metav1.NewTime(now.Truncate(time.Second)))
	return append(found, violations(CheckMeshServices, kindMeshService, ms.Namespace, ms.Name, diffStatus(want, ms.Status))...)
}

// checkService compares live, the Service named like ms, with the generated one, and returns the
// VIP the controller records (the live cluster IP: it never replaces a VIP).
func checkService(ms *meshv1alpha1.MeshService, live *corev1.Service, out meshservice.Output) (vip string, found []Violation) {
	violation := func(field, want, got string) []Violation {
		return []Violation{{Check: CheckServices, Kind: kindService, Namespace: ms.Namespace, Name: ms.Name, Field: field, Want: want, Got: got}}
	}
	switch {
	case live == nil:
		return "", violation(FieldObject, "the generated Service of MeshService "+ms.Name, "none")
	case meshservice.Headless(live):
		return "", violation("spec.clusterIP", "a VIP", "None (headless)")
	}
	want, err := meshservice.ServiceToWrite(live, out.Service)
	if err != nil {
		return live.Spec.ClusterIP, violation(FieldObject, "the generated Service", "it could not be generated: "+err.Error())
	}
	var diffs []fieldDiff
	diffs = append(diffs, diffValue("metadata.labels", want.Labels, live.Labels)...)
	diffs = append(diffs, diffValue("metadata.annotations", want.Annotations, live.Annotations)...)
	diffs = append(diffs, diffValue("metadata.ownerReferences", want.OwnerReferences, live.OwnerReferences)...)
	diffs = append(diffs, diffFields("spec", want.Spec, live.Spec)...)
	return want.Spec.ClusterIP, violations(CheckServices, kindService, ms.Namespace, ms.Name, diffs)
}

// diffStatus compares a MeshService status field by field: ports by port number, conditions by
// type, the rest as they are.
func diffStatus(want, got meshv1alpha1.MeshServiceStatus) []fieldDiff {
	diffs := diffFields("status", want, got, "ports", "conditions")
	diffs = append(diffs, diffConditions("status.conditions", want.Conditions, got.Conditions)...)
	var ports []int32
	for _, list := range [][]meshv1alpha1.ServicePort{want.Ports, got.Ports} {
		for _, p := range list {
			if !slices.Contains(ports, p.Port) {
				ports = append(ports, p.Port)
			}
		}
	}
	slices.Sort(ports)
	find := func(list []meshv1alpha1.ServicePort, port int32) *meshv1alpha1.ServicePort {
		for i := range list {
			if list[i].Port == port {
				return &list[i]
			}
		}
		return nil
	}
	for _, port := range ports {
		prefix := fmt.Sprintf("status.ports[%d]", port)
		w, g := find(want.Ports, port), find(got.Ports, port)
		if w == nil || g == nil {
			diffs = append(diffs, fieldDiff{prefix, renderPort(w), renderPort(g)})
			continue
		}
		diffs = append(diffs, diffFields(prefix, *w, *g, "conditions")...)
		diffs = append(diffs, diffConditions(prefix+".conditions", w.Conditions, g.Conditions)...)
	}
	if !slices.EqualFunc(want.Ports, got.Ports, func(a, b meshv1alpha1.ServicePort) bool { return a.Port == b.Port }) && len(diffs) == 0 {
		diffs = append(diffs, fieldDiff{"status.ports", "sorted by port", "out of order"})
	}
	return diffs
}

func renderPort(p *meshv1alpha1.ServicePort) string {
	if p == nil {
		return absent
	}
	return fmt.Sprintf("%d/%s with %d endpoints", p.Port, p.Protocol, p.Endpoints)
}
