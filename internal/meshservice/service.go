// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package meshservice

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/conditions"
	"github.com/aether-mesh/aether-operator/internal/portspec"
	"github.com/aether-mesh/aether-operator/internal/resolve"
)

// Labels and annotations of the generated Service.
const (
	// LabelGenerated marks a Service the controller generated.
	LabelGenerated = "aether.io/generated"
	// AnnotationAppProtocol is http when the service has an HTTP-class port, else tcp.
	AnnotationAppProtocol = "aether.io/app-protocol"
	// AnnotationPortProtocols lists the declared ports and protocols: "5353=udp,8080=http,9000=tcp,9090=http2".
	AnnotationPortProtocols = "aether.io/port-protocols"
)

// servicePort is one port of the generated Service: TCP unless protocol says UDP.
type servicePort struct {
	name        string
	port        int32
	appProtocol string
	protocol    corev1.Protocol
}

// generatedService is the Service that carries the dial surface under the Kubernetes names:
// selectorless (the mesh routes, not kube-proxy endpoints), the mesh ports 18081 and 18082, 80
// and 443 as name-only ports unless declared, and one port per declared port: a UDP one as a
// UDP port (udp-<p>), and, when the primary is UDP, 18082/UDP (mesh-udp), what <name>:18082/udp
// dials. A UDPRoute attaches to those, as a TCPRoute to the TCP ones. Only the ports'
// numbers and protocols come from endpoints: nothing in a MeshEndpoint can set a selector,
// external IPs, load-balancer fields or another namespace.
func generatedService(in Input, set portspec.PortSet) *corev1ac.ServiceApplyConfiguration {
	ports := []servicePort{{name: "mesh", port: meshv1alpha1.MeshHTTPPort}, {name: "mesh-tcp", port: meshv1alpha1.MeshTCPPort}}
	if _, ok := resolve.DefaultUDPPort(set); ok {
		ports = append(ports, servicePort{name: "mesh-udp", port: meshv1alpha1.MeshTCPPort, protocol: corev1.ProtocolUDP})
	}
	if _, declared := set.Lookup(resolve.HTTPPort); !declared {
		ports = append(ports, servicePort{name: "http", port: resolve.HTTPPort})
	}
	if _, declared := set.Lookup(resolve.HTTPSPort); !declared {
		ports = append(ports, servicePort{name: "https", port: resolve.HTTPSPort})
	}
	anyHTTP := false
	protocols := make([]string, 0, len(set.Ports))
	for _, p := range set.Ports {
		n := strconv.Itoa(int(p.Port))
		switch p.Protocol {
		case meshv1alpha1.ProtocolHTTP:
			ports = append(ports, servicePort{name: "http-" + n, port: p.Port, appProtocol: "http"})
			protocols = append(protocols, n+"=http")
		case meshv1alpha1.ProtocolHTTP2:
			ports = append(ports, servicePort{name: "h2-" + n, port: p.Port, appProtocol: "kubernetes.io/h2c"})
			protocols = append(protocols, n+"=http2")
		case meshv1alpha1.ProtocolUDP:
			ports = append(ports, servicePort{name: "udp-" + n, port: p.Port, protocol: corev1.ProtocolUDP})
			protocols = append(protocols, n+"=udp")
		default:
			ports = append(ports, servicePort{name: "tcp-" + n, port: p.Port})
			protocols = append(protocols, n+"=tcp")
		}
		anyHTTP = anyHTTP || p.Protocol.IsHTTP()
	}
	// By number, TCP ("" here) before UDP on the one number that has both (18082).
	slices.SortFunc(ports, func(a, b servicePort) int {
		return cmp.Or(cmp.Compare(a.port, b.port), cmp.Compare(a.protocol, b.protocol))
	})

	appProtocol := "tcp"
	if anyHTTP {
		appProtocol = "http"
	}
	// The values the API server would default for a ClusterIP Service are stated: the controller
	// compares the whole live spec with this one (ServiceToWrite), so a user's change to any of
	// them is reverted like any other field.
	spec := corev1ac.ServiceSpec().WithType(corev1.ServiceTypeClusterIP).
		WithSessionAffinity(corev1.ServiceAffinityNone).
		WithInternalTrafficPolicy(corev1.ServiceInternalTrafficPolicyCluster).
		WithIPFamilyPolicy(corev1.IPFamilyPolicySingleStack)
	for _, p := range ports {
		sp := corev1ac.ServicePort().WithName(p.name).WithPort(p.port).WithProtocol(cmp.Or(p.protocol, corev1.ProtocolTCP)).
			WithTargetPort(intstr.FromInt32(p.port))
		if p.appProtocol != "" {
			sp.WithAppProtocol(p.appProtocol)
		}
		spec.WithPorts(sp)
	}
	return corev1ac.Service(in.Name, in.Namespace).
		WithLabels(map[string]string{LabelGenerated: "true"}).
		WithAnnotations(map[string]string{
			AnnotationAppProtocol:   appProtocol,
			AnnotationPortProtocols: strings.Join(protocols, ","),
		}).
		WithOwnerReferences(metav1ac.OwnerReference().
			WithAPIVersion(meshv1alpha1.GroupVersion.String()).WithKind("MeshService").
			WithName(in.Name).WithUID(in.UID).WithController(true).WithBlockOwnerDeletion(true)).
		WithSpec(spec)
}

// IsGenerated reports whether svc is the mesh's own Service for the MeshService of UID owner: it
// has an owner reference to that MeshService, or — after its owner references were stripped, or
// its MeshService deleted and recreated with a new UID — it carries the generated label AND was
// written by fieldManager (the controller's). The label alone is not enough: anyone can copy a
// label, and a user's Service is never modified. (A user can write under any field manager's
// name; one who writes as the controller hands the Service to the mesh, which then makes it the
// generated one and nothing more.)
func IsGenerated(svc *corev1.Service, owner types.UID, fieldManager string) bool {
	for _, ref := range svc.OwnerReferences {
		if ref.UID == owner {
			return true
		}
	}
	if svc.Labels[LabelGenerated] != "true" {
		return false
	}
	for _, entry := range svc.ManagedFields {
		if entry.Manager == fieldManager {
			return true
		}
	}
	return false
}

// ServiceToWrite returns the whole Service the controller writes so that the cluster holds
// exactly the generated one: live (nil when none exists) with the generated labels and
// annotations set, the owner reference to the MeshService as its only MeshService or controller
// reference, and the spec replaced whole by the generated one. Of the live spec only what the API
// server allocated survives: the cluster IP (the VIP) and its IP family. Everything else a user
// may have added — a selector, external IPs, another type, node ports, load-balancer fields,
// session affinity, traffic policies, extra or renumbered ports — is gone. Labels and annotations
// of others are kept: they do not change where traffic goes.
//
// A Service whose type was changed to ExternalName has lost its cluster IP (the API server
// releases it): the Service written has none, and the API server allocates a new VIP. A headless
// one (clusterIP None) cannot get a VIP by an update at all: see Headless.
//
// The result is a fresh object; a live Service equal to it (equality.Semantic) is converged and
// needs no write.
func ServiceToWrite(live *corev1.Service, generated *corev1ac.ServiceApplyConfiguration) (*corev1.Service, error) {
	want := &corev1.Service{}
	data, err := json.Marshal(generated)
	if err != nil {
		return nil, fmt.Errorf("encoding the generated Service: %w", err)
	}
	if err := json.Unmarshal(data, want); err != nil {
		return nil, fmt.Errorf("decoding the generated Service: %w", err)
	}
	if live == nil {
		return want, nil
	}

	out := live.DeepCopy()
	out.Labels = withEntries(out.Labels, want.Labels)
	out.Annotations = withEntries(out.Annotations, want.Annotations)
	out.OwnerReferences = slices.DeleteFunc(out.OwnerReferences, func(ref metav1.OwnerReference) bool {
		// A stale reference to an earlier MeshService would be a second controller reference
		// (refused by the API server) or a dangling one the garbage collector trips over.
		return ref.Kind == "MeshService" && strings.HasPrefix(ref.APIVersion, meshv1alpha1.GroupVersion.Group+"/") ||
			(ref.Controller != nil && *ref.Controller)
	})
	out.OwnerReferences = append(out.OwnerReferences, want.OwnerReferences...)

	out.Spec = want.Spec
	if vip := live.Spec.ClusterIP; vip != "" && vip != corev1.ClusterIPNone {
		out.Spec.ClusterIP = vip
		out.Spec.ClusterIPs = []string{vip}
		if len(live.Spec.IPFamilies) > 0 {
			// SingleStack: a secondary cluster IP a user asked for (PreferDualStack) is released.
			out.Spec.IPFamilies = live.Spec.IPFamilies[:1]
		}
	}
	return out, nil
}

// Headless reports whether svc has no VIP and cannot get one by an update (clusterIP None is
// immutable): it must be deleted and created again.
func Headless(svc *corev1.Service) bool { return svc.Spec.ClusterIP == corev1.ClusterIPNone }

// withEntries returns m with every entry of add set (a new map when m is nil).
func withEntries(m, add map[string]string) map[string]string {
	if m == nil && len(add) > 0 {
		m = make(map[string]string, len(add))
	}
	maps.Copy(m, add)
	return m
}

// WriteFailedCondition is the ServiceReady condition when the API server refused to create or
// update the generated Service: False, reason ServiceWriteFailed, with the API server's answer,
// the whole message cut to a condition message's limit.
func WriteFailedCondition(namespace, name, refusal string) metav1.Condition {
	return metav1.Condition{
		Type: meshv1alpha1.ServiceConditionServiceReady, Status: metav1.ConditionFalse, Reason: meshv1alpha1.ServiceReasonServiceWriteFailed,
		Message: conditions.Truncate(fmt.Sprintf("the API server refused to write the generated Service %s/%s, so it may not carry "+
			"the dial surface below (the controller retries): %s", namespace, name, refusal), conditions.MaxConditionMessage),
	}
}
