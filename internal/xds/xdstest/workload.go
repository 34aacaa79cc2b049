// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdstest

import (
	"cmp"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	configv1 "github.com/aether-mesh/aether-operator/api/config/v1"
	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/portspec"
	"github.com/aether-mesh/aether-operator/internal/registration"
	"github.com/aether-mesh/aether-operator/internal/resolve"
	"github.com/aether-mesh/aether-operator/internal/workloadidentity"
)

// Domain is the mesh domain of every scenario.
const Domain = resolve.DefaultMeshDomain

// The scenarios' nodes: this node (node-a), a node of the same region (node-b), and a node of
// another region (node-c), so that every locality priority of EDS appears.
const (
	ThisNode    = "node-a"
	SameRegion  = "node-b"
	OtherRegion = "node-c"
)

var nodes = map[string]*corev1.Node{
	ThisNode:    node(ThisNode, "eu-west", "eu-west-1a"),
	SameRegion:  node(SameRegion, "eu-west", "eu-west-1b"),
	OtherRegion: node(OtherRegion, "us-east", "us-east-1a"),
}

func node(name, region, zone string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name,
		Labels: map[string]string{registration.LabelRegion: region, registration.LabelZone: zone}}}
}

// Day is the date every scenario's objects are created on.
var Day = time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)

// Workload is one pod of a mesh service as a scenario declares it: its annotations in the
// grammar of internal/portspec, where it runs, its address and its health. It becomes a
// MeshEndpoint the way the node agent writes one (registration.Registration) and the controller
// verifies it (registration.Verify), and, on this node, a model.LocalPod.
type Workload struct {
	Namespace string
	// Service is the pod's ServiceAccount, its mesh service's name.
	Service string
	Name    string
	Node    string
	Address string
	// Port, Ports and Protocol are the endpoint.aether.io annotations (empty: not set).
	Port, Ports, Protocol string
	Health                meshv1alpha1.Health
	// Created is when the pod (and its MeshEndpoint) was created: the votes' tie-breaks read it.
	Created time.Time
	// Capture is the pod's capture mode when it runs on this node (empty: surface).
	Capture model.CaptureMode
	// Metadata are the metadata.endpoint.aether.io/<key> annotations, by key.
	Metadata map[string]string
	// UDSSocket is the endpoint.aether.io/uds-socket annotation (empty: not set); the pod then
	// has the csi.aether.io volume it names, and an fsGroup.
	UDSSocket string
	// Upstreams is the config.aether.io/upstreams annotation (empty: not set).
	Upstreams string
	// HealthCheckMode and HealthPath are the endpoint.aether.io/health-check-mode and
	// health-path annotations (empty: not set).
	HealthCheckMode, HealthPath string
}

// Pod is the managed pod the workload is.
func (w Workload) Pod() *corev1.Pod {
	annotations := map[string]string{}
	for key, value := range map[string]string{portspec.AnnotationPort: w.Port, portspec.AnnotationPorts: w.Ports,
		portspec.AnnotationProtocol: w.Protocol, portspec.AnnotationUpstreams: w.Upstreams,
		portspec.AnnotationHealthCheckMode: w.HealthCheckMode, portspec.AnnotationHealthPath: w.HealthPath} {
		if value != "" {
			annotations[key] = value
		}
	}
	for key, value := range w.Metadata {
		annotations[portspec.AnnotationMetadataPrefix+key] = value
	}
	var spec corev1.PodSpec
	if w.UDSSocket != "" {
		annotations[portspec.AnnotationUDSSocket] = w.UDSSocket
		volume, _, _ := strings.Cut(w.UDSSocket, "/")
		spec.Volumes = []corev1.Volume{{Name: volume, VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: registration.UDSDriver}}}}
		spec.SecurityContext = &corev1.PodSecurityContext{FSGroup: new(int64(65532))}
	}
	spec.ServiceAccountName, spec.NodeName = w.Service, w.Node
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.Namespace, Name: w.Name, UID: types.UID("uid-" + w.Name),
			Labels: map[string]string{portspec.LabelManaged: portspec.ManagedValue}, Annotations: annotations,
			CreationTimestamp: metav1.NewTime(w.Created)},
		Spec:   spec,
		Status: corev1.PodStatus{PodIP: w.Address, PodIPs: []corev1.PodIP{{IP: w.Address}}},
	}
}

// Endpoint is the workload's MeshEndpoint: the spec the node agent registers, the health it
// probed, and the controller's Verified verdict. A workload whose annotations do not parse or
// whose node is unknown is a broken scenario: it panics, naming the workload.
func (w Workload) Endpoint() meshv1alpha1.MeshEndpoint {
	n, ok := nodes[w.Node]
	if !ok {
		panic(fmt.Sprintf("xdstest: workload %s/%s runs on node %q, none of %s, %s, %s", w.Namespace, w.Name, w.Node, ThisNode, SameRegion, OtherRegion))
	}
	pod := w.Pod()
	spec, err := registration.Registration(pod, n)
	if err != nil {
		panic(fmt.Sprintf("xdstest: workload %s/%s does not register: %v", w.Namespace, w.Name, err))
	}
	ep := meshv1alpha1.MeshEndpoint{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.Namespace, Name: w.Name, CreationTimestamp: metav1.NewTime(w.Created)},
		Spec:       spec,
		Status:     meshv1alpha1.MeshEndpointStatus{Health: w.Health},
	}
	apimeta.SetStatusCondition(&ep.Status.Conditions, registration.Verify(&ep, pod))
	return ep
}

// Local is the workload as its node's data plane sees it: netns, identity, capture mode and its
// own declaration.
func (w Workload) Local() model.LocalPod {
	ep := w.Endpoint()
	lp := model.LocalPod{Namespace: w.Namespace, Name: w.Name, UID: "uid-" + w.Name, Service: w.Service,
		Address: w.Address, Primary: ep.Spec.PrimaryPort, Ports: ep.Spec.Ports,
		NetNS:    filepath.Join("/var/run/netns", "cni-"+w.Namespace+"-"+w.Name),
		Identity: Identity(w.Namespace, w.Service), Capture: cmp.Or(w.Capture, model.CaptureSurface)}
	if w.Upstreams != "" {
		// Parsed as the node agent parses it (internal/portspec): a list it would refuse is a
		// broken scenario.
		spec, err := portspec.Parse(w.Pod().Annotations)
		if err != nil {
			panic(fmt.Sprintf("xdstest: workload %s/%s: %v", w.Namespace, w.Name, err))
		}
		lp.Upstreams = spec.Upstreams
	}
	if w.UDSSocket != "" {
		// Resolved as the node agent resolves it: a workload whose socket it would refuse is a
		// broken scenario.
		spec, err := portspec.Parse(w.Pod().Annotations)
		if err != nil {
			panic(fmt.Sprintf("xdstest: workload %s/%s: %v", w.Namespace, w.Name, err))
		}
		d, err := registration.ResolveUDS(w.Pod(), registration.UDSInputs{Enabled: true, Root: portspec.UDSHostRoot, Annotated: spec.UDSSocket})
		if err != nil {
			panic(fmt.Sprintf("xdstest: workload %s/%s: %v", w.Namespace, w.Name, err))
		}
		lp.UDSPath = d.Path
	}
	return lp
}

// Identity is a service's SPIFFE ID in the scenarios' trust domain.
func Identity(namespace, service string) string {
	td := spiffeid.RequireTrustDomainFromString(Domain)
	return spiffeid.RequireFromSegments(td, "ns", namespace, "sa", service).String()
}

// ServiceDecl is a MeshService of a scenario: its key and its VIP (data only: nothing dials it).
type ServiceDecl struct {
	Namespace, Name, VIP string
}

// Scenario is a node's mesh as data: the services, the pods behind them (those on ThisNode are
// the node's local pods) and the accepted routes.
type Scenario struct {
	Services  []ServiceDecl
	Workloads []Workload
	Routes    []model.Route
	// Issuer is the mesh's workload-identity issuer (model.Mesh.Issuer): spire when empty.
	Issuer workloadidentity.Issuer
	// Upstreams is the node's distribution mode (model.Mesh.Upstreams): all when empty.
	Upstreams model.UpstreamsMode
	// Demanded are the services each local identity asked for on demand (model.Mesh.Demanded).
	Demanded map[string][]string
	// HopHTTP3 makes the hop between node proxies prefer HTTP/3 (model.Mesh.HopHTTP3).
	HopHTTP3 bool
	// Unlabelled are the nodes that carry no topology labels here: their locality, and that of
	// the endpoints on them, is empty.
	Unlabelled []string
	// Policies are the mesh's AccessPolicies: each local pod's Access is what they make of its
	// ports (model.PodAccess, as the agent reads them).
	Policies []configv1.AccessPolicy
}

// Inputs are the model's inputs of every service, sorted by namespace and name: its identity,
// VIP and verified MeshEndpoints (as the agent's view lists them).
func (s Scenario) Inputs() []model.Input {
	byService := map[ServiceDecl][]meshv1alpha1.MeshEndpoint{}
	for _, w := range s.Workloads {
		if ep := w.Endpoint(); apimeta.IsStatusConditionTrue(ep.Status.Conditions, meshv1alpha1.EndpointConditionVerified) {
			if slices.Contains(s.Unlabelled, w.Node) {
				ep.Spec.Locality = meshv1alpha1.Locality{}
			}
			key := ServiceDecl{Namespace: w.Namespace, Name: w.Service}
			byService[key] = append(byService[key], ep)
		}
	}
	out := make([]model.Input, 0, len(s.Services))
	for _, d := range s.Services {
		out = append(out, model.Input{Namespace: d.Namespace, Name: d.Name, Identity: Identity(d.Namespace, d.Name), VIP: d.VIP,
			Endpoints: byService[ServiceDecl{Namespace: d.Namespace, Name: d.Name}]})
	}
	slices.SortFunc(out, func(a, b model.Input) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return out
}

// LocalPods are the workloads on ThisNode, sorted by namespace and name.
func (s Scenario) LocalPods() []model.LocalPod { return s.localPodsOn(ThisNode) }

// localPodsOn are the workloads on node, sorted by namespace and name.
func (s Scenario) localPodsOn(node string) []model.LocalPod {
	var out []model.LocalPod
	for _, w := range s.Workloads {
		if w.Node == node {
			lp := w.Local()
			lp.Access = model.PodAccess(Domain, lp, s.Policies)
			out = append(out, lp)
		}
	}
	slices.SortFunc(out, func(a, b model.LocalPod) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return out
}

// Node is ThisNode with its locality.
func Node() model.Node { return nodeModel(ThisNode) }

// nodeModel is the scenarios' node name with its locality.
func nodeModel(name string) model.Node {
	n := nodes[name]
	return model.Node{Name: n.Name, Locality: meshv1alpha1.Locality{Region: n.Labels[registration.LabelRegion], Zone: n.Labels[registration.LabelZone]}}
}

// Mesh is the scenario as Build reads it for ThisNode: every service built by
// model.BuildService.
func (s Scenario) Mesh() model.Mesh { return s.MeshOn(ThisNode) }

// MeshOn is the scenario as the agent of node builds it (ThisNode, SameRegion or OtherRegion):
// the workloads on node are its local pods and node's locality ranks the endpoints; the services
// and routes are the mesh's. A live data plane runs one per node its workloads run on.
func (s Scenario) MeshOn(node string) model.Mesh {
	m := model.Mesh{Domain: Domain, Issuer: s.Issuer, Node: nodeModel(node), Pods: s.localPodsOn(node), Routes: slices.Clone(s.Routes),
		Upstreams: s.Upstreams, Demanded: s.Demanded, HopHTTP3: s.HopHTTP3}
	if slices.Contains(s.Unlabelled, node) {
		m.Node.Locality = meshv1alpha1.Locality{}
	}
	for _, in := range s.Inputs() {
		m.Services = append(m.Services, model.BuildService(in))
	}
	slices.SortFunc(m.Routes, func(a, b model.Route) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return m
}
