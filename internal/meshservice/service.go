// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package meshservice

import (
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/portspec"
	"github.com/aether-mesh/aether-operator/internal/resolve"
)

// Labels and annotations of the generated Service.
const (
	// LabelGenerated marks a Service the controller generated.
	LabelGenerated = "aether.io/generated"
	// AnnotationAppProtocol is http when the service has an HTTP-class port, else tcp.
	AnnotationAppProtocol = "aether.io/app-protocol"
	// AnnotationPortProtocols lists the declared ports and protocols: "8080=http,9000=tcp,9090=http2".
	AnnotationPortProtocols = "aether.io/port-protocols"
)

// servicePort is one port of the generated Service.
type servicePort struct {
	name        string
	port        int32
	appProtocol string
}

// generatedService is the Service that carries the dial surface under the Kubernetes names:
// selectorless (the mesh routes, not kube-proxy endpoints), the mesh ports 18081 and 18082, 80
// and 443 as name-only ports unless declared, and one port per declared port. Only the ports'
// numbers and protocols come from endpoints: nothing in a MeshEndpoint can set a selector,
// external IPs, load-balancer fields or another namespace.
func generatedService(in Input, set portspec.PortSet) *corev1ac.ServiceApplyConfiguration {
	ports := []servicePort{{name: "mesh", port: resolve.MeshHTTPPort}, {name: "mesh-tcp", port: resolve.MeshTCPPort}}
	if _, declared := set.Lookup(80); !declared {
		ports = append(ports, servicePort{name: "http", port: 80})
	}
	if _, declared := set.Lookup(443); !declared {
		ports = append(ports, servicePort{name: "https", port: 443})
	}
	anyHTTP := false
	protocols := make([]string, 0, len(set.Ports))
	for _, p := range set.Ports {
		n := strconv.Itoa(int(p.Number))
		switch p.Protocol {
		case portspec.HTTP:
			ports = append(ports, servicePort{name: "http-" + n, port: p.Number, appProtocol: "http"})
			protocols = append(protocols, n+"=http")
		case portspec.HTTP2:
			ports = append(ports, servicePort{name: "h2-" + n, port: p.Number, appProtocol: "kubernetes.io/h2c"})
			protocols = append(protocols, n+"=http2")
		default:
			ports = append(ports, servicePort{name: "tcp-" + n, port: p.Number})
			protocols = append(protocols, n+"=tcp")
		}
		anyHTTP = anyHTTP || p.Protocol.IsHTTP()
	}
	slices.SortFunc(ports, func(a, b servicePort) int { return int(a.port - b.port) })

	appProtocol := "tcp"
	if anyHTTP {
		appProtocol = "http"
	}
	spec := corev1ac.ServiceSpec().WithType(corev1.ServiceTypeClusterIP)
	for _, p := range ports {
		sp := corev1ac.ServicePort().WithName(p.name).WithPort(p.port).WithProtocol(corev1.ProtocolTCP).
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
