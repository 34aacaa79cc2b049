// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package meshservice

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
)

// ExistingService is what the translation reads of a Service of the service's name that is not
// the mesh's (a user's, made before the workload joined the mesh): enough to judge whether the
// mesh can use it read-only (Adoptable) and to tell clients what its own ports reach.
type ExistingService struct {
	// Type, ClusterIP and Selector are the Service's spec.type, spec.clusterIP and spec.selector.
	Type      corev1.ServiceType `json:"type"`
	ClusterIP string             `json:"clusterIP,omitempty"`
	Selector  map[string]string  `json:"selector,omitempty"`
	// Ports are its spec.ports.
	Ports []corev1.ServicePort `json:"ports,omitempty"`
	// Selected are the pods of the namespace its selector selects, but those that finished
	// (Succeeded, Failed: kube-proxy sends them nothing). Empty without a selector.
	Selected []SelectedPod `json:"selected,omitempty"`
}

// SelectedPod is one pod a Service's selector selects: its name and ServiceAccount.
type SelectedPod struct {
	Name           string `json:"name"`
	ServiceAccount string `json:"serviceAccount"`
}

// Adoptable reports why the mesh cannot use svc, the Service of the service's name that is not
// its own, as the service's VIP: "" when it can. The rule: svc is a ClusterIP Service with a
// cluster IP (not headless), it has a selector, every pod its selector selects runs as the
// service's ServiceAccount (the service is named after it), and it selects the pod of every one
// of the service's endpoints. So kube-proxy sends a client outside the mesh to the same workload
// the mesh sends a meshed client to: the Service and the MeshService are two doors to one
// workload. The mesh then reads the Service and never writes it.
//
// NodePort and LoadBalancer Services are not adopted: they expose the workload beyond the
// cluster, around the mesh, and the mesh does not take such a door as its own. ExternalName
// Services have no cluster IP, selectorless ones route to whatever endpoints someone writes.
//
// The reason returned says what is wrong and how to fix it, in a condition message's words.
func Adoptable(service string, svc *ExistingService, endpoints []meshv1alpha1.MeshEndpoint) string {
	switch {
	case svc.Type == corev1.ServiceTypeExternalName:
		return "it is of type ExternalName, a DNS alias with no cluster IP the mesh could capture"
	case svc.Type == corev1.ServiceTypeNodePort || svc.Type == corev1.ServiceTypeLoadBalancer:
		return fmt.Sprintf("it is of type %s: it exposes the pods beyond the cluster, around the mesh, and the mesh adopts only a "+
			"ClusterIP Service; rename that Service (for example %s-public) and the mesh generates its own %s", svc.Type, service, service)
	case svc.Type != "" && svc.Type != corev1.ServiceTypeClusterIP:
		return fmt.Sprintf("it is of type %s, and the mesh adopts only a ClusterIP Service", svc.Type)
	case svc.ClusterIP == corev1.ClusterIPNone:
		return "it is headless (clusterIP: None): it has no VIP the mesh could capture; delete it, or recreate it with a cluster IP"
	case svc.ClusterIP == "":
		return "it has no cluster IP yet"
	case len(svc.Selector) == 0:
		return "it has no selector: its endpoints are whatever someone writes, not this service's pods; give it a selector that " +
			"selects exactly the pods running as ServiceAccount " + service
	}
	for _, p := range svc.Selected {
		if p.ServiceAccount != service {
			others := 0
			for _, q := range svc.Selected {
				if q.ServiceAccount != service {
					others++
				}
			}
			return fmt.Sprintf("its selector %s also selects pods not of this service: %d, for example pod %s running as "+
				"ServiceAccount %s; fix the selector so that it selects only pods running as ServiceAccount %s, or give the "+
				"service's workload another ServiceAccount (the mesh service is named after it) so that the mesh generates its own Service",
				formatSelector(svc.Selector), others, p.Name, p.ServiceAccount, service)
		}
	}
	selected := make(map[string]bool, len(svc.Selected))
	for _, p := range svc.Selected {
		selected[p.Name] = true
	}
	for _, ep := range endpoints {
		if !selected[ep.Spec.PodName] {
			return fmt.Sprintf("its selector %s does not select pod %s, an endpoint of this service: clients outside the mesh would "+
				"not reach it; fix the selector so that it selects every pod running as ServiceAccount %s",
				formatSelector(svc.Selector), ep.Spec.PodName, service)
		}
	}
	return ""
}

// adoptedMessage is ServiceReady's message for an adopted Service: which Service, that the mesh
// never writes it, what its own ports reach for clients outside the mesh (kube-proxy's rule), and
// which spellings the mesh serves meshed clients on its VIP (the dial surface, resolve's rule).
func adoptedMessage(namespace, name string, svc *ExistingService, surface []meshv1alpha1.Dial) string {
	var own, unserved []string
	meshPorts := map[int32]bool{}
	for _, d := range surface {
		if d.Port != nil && (d.Outcome == meshv1alpha1.DialReaches || d.Outcome == meshv1alpha1.DialHostDecides) {
			meshPorts[*d.Port] = true
		}
	}
	for _, p := range svc.Ports {
		own = append(own, fmt.Sprintf("%d/%s to the pods' port %s", p.Port, orTCP(p.Protocol), p.TargetPort.String()))
		if !meshPorts[p.Port] && p.Port != meshv1alpha1.MeshHTTPPort && p.Port != meshv1alpha1.MeshTCPPort {
			unserved = append(unserved, fmt.Sprint(p.Port))
		}
	}
	var served []string
	for _, d := range surface {
		if d.Outcome == meshv1alpha1.DialReaches || d.Outcome == meshv1alpha1.DialHostDecides {
			served = append(served, d.Address)
		}
	}
	msg := fmt.Sprintf("Service %s/%s existed before the mesh and selects exactly this service's pods: the mesh uses its cluster IP %s "+
		"as the VIP and never writes it. Clients outside the mesh reach, through kube-proxy and without the mesh, only its own ports: %s. "+
		"Meshed clients are captured before kube-proxy and get the dial surface below: %s",
		namespace, name, svc.ClusterIP, orNone(strings.Join(own, ", ")), orNone(strings.Join(served, ", ")))
	if len(unserved) > 0 {
		msg += fmt.Sprintf(". Of its ports, %s the mesh does not serve: for every client they reach the pods through "+
			"kube-proxy, outside the mesh", strings.Join(unserved, ", "))
	}
	return msg
}

func orTCP(p corev1.Protocol) corev1.Protocol {
	if p == "" {
		return corev1.ProtocolTCP
	}
	return p
}

// formatSelector is a selector as kubectl writes it, its keys sorted: "app=web,tier=front".
func formatSelector(selector map[string]string) string {
	keys := slices.Sorted(maps.Keys(selector))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + selector[k]
	}
	return strings.Join(parts, ",")
}

// ExistingServiceOf is what the translation reads of svc, a Service that is not the mesh's, given
// pods, the namespace's pods or any subset holding those svc's selector selects: the selected
// pods are picked here, by the selector, the way the endpoints controller picks them.
func ExistingServiceOf(svc *corev1.Service, pods []corev1.Pod) *ExistingService {
	out := &ExistingService{Type: svc.Spec.Type, ClusterIP: svc.Spec.ClusterIP, Selector: svc.Spec.Selector, Ports: svc.Spec.Ports}
	if out.Type == "" {
		out.Type = corev1.ServiceTypeClusterIP
	}
	if len(svc.Spec.Selector) == 0 {
		return out
	}
	selector := labels.SelectorFromSet(svc.Spec.Selector)
	for i := range pods {
		p := &pods[i]
		if p.Namespace != svc.Namespace || !selector.Matches(labels.Set(p.Labels)) ||
			p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		sa := p.Spec.ServiceAccountName
		if sa == "" {
			sa = "default"
		}
		out.Selected = append(out.Selected, SelectedPod{Name: p.Name, ServiceAccount: sa})
	}
	slices.SortFunc(out.Selected, func(a, b SelectedPod) int { return strings.Compare(a.Name, b.Name) })
	return out
}
