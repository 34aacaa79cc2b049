// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package plugin

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
)

// ServiceStatus is one MeshService as kubectl aether status shows it.
type ServiceStatus struct {
	Service    ServiceRef                  `json:"service"`
	Endpoints  meshv1alpha1.EndpointCounts `json:"endpoints"`
	Conditions []metav1.Condition          `json:"conditions,omitempty"`
	Ports      []PortReport                `json:"ports"`
	Routes     []AttachedRoute             `json:"routes,omitempty"`
}

// Statuses is every service's ports and the routes parented to it, from what the cluster holds.
func Statuses(services []meshv1alpha1.MeshService, eps []meshv1alpha1.MeshEndpoint, all []RouteRef) []ServiceStatus {
	out := make([]ServiceStatus, 0, len(services))
	for _, ms := range services {
		svc := ServiceRef{Namespace: ms.Namespace, Name: ms.Name}
		var own []meshv1alpha1.MeshEndpoint
		for _, ep := range eps {
			if ep.Namespace == ms.Namespace {
				own = append(own, ep)
			}
		}
		counts := endpointsByProtocol(own, ms.Name)
		st := ServiceStatus{Service: svc, Endpoints: ms.Status.Endpoints, Conditions: ms.Status.Conditions}
		for _, p := range ms.Status.Ports {
			st.Ports = append(st.Ports, *portReport(ms.Status, p.Port, counts))
		}
		for _, r := range attached(all, svc, 0) {
			if r.Via == ViaParent {
				st.Routes = append(st.Routes, r)
			}
		}
		out = append(out, st)
	}
	return out
}

// Status gathers what Statuses reads: the MeshServices of namespace ("" for all), or the one
// named service.
func Status(ctx context.Context, c client.Reader, namespace, service string) ([]ServiceStatus, error) {
	var services []meshv1alpha1.MeshService
	if service != "" {
		ms := &meshv1alpha1.MeshService{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: service}, ms); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, &ExitError{Code: ExitFound, Msg: fmt.Sprintf("no MeshService %s/%s: no pods of ServiceAccount %s in namespace %s are in the mesh",
					namespace, service, service, namespace)}
			}
			return nil, err
		}
		services = append(services, *ms)
	} else {
		var list meshv1alpha1.MeshServiceList
		if err := c.List(ctx, &list, client.InNamespace(namespace)); err != nil {
			return nil, err
		}
		services = list.Items
	}
	var eps meshv1alpha1.MeshEndpointList
	if err := c.List(ctx, &eps, client.InNamespace(namespace)); err != nil {
		return nil, err
	}
	all, err := listRoutes(ctx, c, "")
	if apierrors.IsForbidden(err) && namespace != "" {
		all, err = listRoutes(ctx, c, namespace)
	}
	if err != nil {
		return nil, err
	}
	return Statuses(services, eps.Items, all), nil
}

// Colours of a condition's status on a terminal. Each is as long as the others, so the table's
// columns stay aligned (tabwriter counts bytes).
const (
	colourTrue    = "\x1b[32m"
	colourFalse   = "\x1b[31m"
	colourUnknown = "\x1b[33m"
	colourNone    = "\x1b[39m"
	colourReset   = "\x1b[0m"
)

// WriteStatus prints the statuses as two tables: every port, then every route parented to a
// service. colour wraps each condition in its status's colour (only for a terminal).
func WriteStatus(w io.Writer, statuses []ServiceStatus, colour bool) error {
	if len(statuses) == 0 {
		_, err := io.WriteString(w, "No MeshServices found.\n")
		return err
	}
	paint := func(c *metav1.Condition) string {
		text, code := "-", colourNone
		if c != nil {
			text = string(c.Status)
			if c.Status != metav1.ConditionTrue {
				text += " " + c.Reason
			}
			code = map[metav1.ConditionStatus]string{metav1.ConditionTrue: colourTrue, metav1.ConditionFalse: colourFalse}[c.Status]
			if code == "" {
				code = colourUnknown
			}
		}
		if !colour {
			return text
		}
		return code + text + colourReset
	}
	// Every cell of a coloured column carries an escape of the same length, the header's too, so
	// tabwriter (which counts bytes) pads them alike.
	header := func(text string) string {
		if !colour {
			return text
		}
		return colourNone + text + colourReset
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "NAMESPACE\tSERVICE\t%s\tPORT\tPROTOCOL\tENDPOINTS\t%s\t%s\n", header("READY"), header("PORT READY"), header("PROTOCOL CONSISTENT"))
	for _, s := range statuses {
		ready := paint(meta.FindStatusCondition(s.Conditions, meshv1alpha1.ServiceConditionReady))
		if len(s.Ports) == 0 {
			fmt.Fprintf(tw, "%s\t%s\t%s\t-\t-\t-\t%s\t%s\n", s.Service.Namespace, s.Service.Name, ready, paint(nil), paint(nil))
		}
		for _, p := range s.Ports {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", s.Service.Namespace, s.Service.Name, ready, p.Port, p.Protocol,
				endpointCells(p), paint(meta.FindStatusCondition(p.Conditions, meshv1alpha1.PortConditionReady)),
				paint(meta.FindStatusCondition(p.Conditions, meshv1alpha1.PortConditionProtocolConsistent)))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var rows []string
	for _, s := range statuses {
		for _, r := range s.Routes {
			port := "*"
			if r.Port != 0 {
				port = fmt.Sprint(r.Port)
			}
			rows = append(rows, fmt.Sprintf("%s\t%s\t%s\t%s %s/%s\t%s\t%s\n", s.Service.Namespace, s.Service.Name, port, r.Kind, r.Namespace, r.Name,
				paint(meta.FindStatusCondition(r.Conditions, string(gwapiv1.RouteConditionAccepted))),
				paint(meta.FindStatusCondition(r.Conditions, string(gwapiv1.RouteConditionResolvedRefs)))))
		}
	}
	if len(rows) == 0 {
		_, err := io.WriteString(w, "\nNo routes are parented to these services.\n")
		return err
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "NAMESPACE\tSERVICE\tPORT\tROUTE\t%s\t%s\n", header("ACCEPTED"), header("RESOLVED REFS"))
	fmt.Fprint(tw, strings.Join(rows, ""))
	return tw.Flush()
}

// endpointCells is "HTTP 2/3" or, while endpoints disagree, "TCP 2/2, HTTP 0/1".
func endpointCells(p PortReport) string {
	if len(p.ByProtocol) == 0 {
		return "0/0"
	}
	parts := make([]string, len(p.ByProtocol))
	for i, c := range p.ByProtocol {
		parts[i] = fmt.Sprintf("%s %d/%d", c.Protocol, c.Ready, c.Total)
	}
	return strings.Join(parts, ", ")
}
