// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package meshservice

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/conditions"
	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/portspec"
	"github.com/aether-mesh/aether-operator/internal/resolve"
	"github.com/aether-mesh/aether-operator/internal/workloadidentity"
)

// Input is everything the translation reads for one service.
type Input struct {
	// Namespace and Name identify the service (Name = the ServiceAccount's name).
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// UID is the MeshService's UID, for the generated Service's owner reference.
	UID types.UID `json:"uid,omitempty"`
	// MeshDomain is the mesh's DNS domain and SPIFFE trust domain.
	MeshDomain string `json:"meshDomain"`
	// Issuer is who issues the workload identities (the manager's --identity-issuer; spire when
	// empty): without one the dial surface refuses raw TCP (internal/resolve).
	Issuer workloadidentity.Issuer `json:"issuer,omitempty"`
	// Endpoints are the service's MeshEndpoints, in any order.
	Endpoints []meshv1alpha1.MeshEndpoint `json:"endpoints"`
	// LastStatus is the MeshService's current status: when the last endpoint goes away its ports
	// and primary are kept, so the VIP and route status do not flap.
	LastStatus meshv1alpha1.MeshServiceStatus `json:"lastStatus,omitzero"`
	// Service is what the cluster holds under the service's name.
	Service ServiceFacts `json:"service"`
}

// ServiceFacts describe the Service named like the service, if any.
type ServiceFacts struct {
	// Exists is true when a Service of that name exists.
	Exists bool `json:"exists"`
	// Owned is true when that Service is the mesh's own (IsGenerated: an owner reference to the
	// MeshService, or the generated label together with the controller's field manager).
	Owned bool `json:"owned"`
	// ClusterIP is its cluster IP, the VIP, when it is ours or adopted.
	ClusterIP string `json:"clusterIP,omitempty"`
	// Existing is what the controller read of it when it is not ours (see Adoptable); nil when
	// it is ours or there is none.
	Existing *ExistingService `json:"existing,omitempty"`
}

// adoption is the verdict on a Service of the service's name that is not the mesh's: adopted
// (used read-only, its cluster IP the VIP), or why not.
type adoption struct {
	foreign bool   // a Service of the name exists and is not the mesh's
	adopted bool   // … and the mesh uses it read-only
	problem string // … or why it cannot (Adoptable)
}

func adoptionOf(in Input) adoption {
	if !in.Service.Exists || in.Service.Owned {
		return adoption{}
	}
	if in.Service.Existing == nil {
		return adoption{foreign: true, problem: "the controller could not read it"}
	}
	problem := Adoptable(in.Name, in.Service.Existing, in.Endpoints)
	return adoption{foreign: true, adopted: problem == "", problem: problem}
}

// Output is what the controller writes.
type Output struct {
	// Status is the MeshService's status, conditions without timestamps (conditions.Merge stamps them).
	Status meshv1alpha1.MeshServiceStatus `json:"status"`
	// Service is the generated Service to apply; nil when a Service of that name is not ours.
	Service *corev1ac.ServiceApplyConfiguration `json:"service,omitempty"`
}

// Translate derives a service's status and its generated Service. It returns an error (and no
// output) only for input no endpoint written through the API could hold, such as a name that is
// not a valid SPIFFE path.
func Translate(in Input) (Output, error) {
	identity, err := identityOf(in)
	if err != nil {
		return Output{}, err
	}
	st := meshv1alpha1.MeshServiceStatus{Identity: identity, VIP: in.Service.ClusterIP}
	adopt := adoptionOf(in)
	if adopt.foreign && !adopt.adopted {
		st.VIP = ""
	}
	svc := model.BuildService(model.Input{Namespace: in.Namespace, Name: in.Name, Identity: identity, VIP: st.VIP,
		Endpoints: in.Endpoints})
	st.Endpoints.Total, st.Endpoints.Ready = svc.Endpoints, svc.Ready
	st.EndpointsSummary = fmt.Sprintf("%d/%d", st.Endpoints.Ready, st.Endpoints.Total)

	if svc.Endpoints == 0 {
		st.PrimaryPort = in.LastStatus.PrimaryPort
		for _, p := range in.LastStatus.Ports {
			st.Ports = append(st.Ports, meshv1alpha1.ServicePort{Port: p.Port, Protocol: p.Protocol,
				Conditions: []metav1.Condition{
					portCondition(meshv1alpha1.PortConditionReady, false, meshv1alpha1.ServiceReasonNoEndpoints,
						"no endpoints: the port is kept as its endpoints last declared it"),
					portCondition(meshv1alpha1.PortConditionProtocolConsistent, true, meshv1alpha1.ServiceReasonPortsAgree,
						"no endpoints disagree"),
				}})
		}
	} else {
		st.PrimaryPort = svc.Primary
		for _, p := range svc.Ports {
			st.Ports = append(st.Ports, servicePortOf(p))
		}
	}

	set := portSetOf(st.PrimaryPort, st.Ports)
	st.PortsSummary = meshv1alpha1.FormatPorts(set.Ports) // set.Ports is st.Ports, number and protocol
	if port, ok := resolve.DefaultHTTPPort(set); ok {
		st.DefaultHTTPPort = &port
	}
	if port, ok := resolve.DefaultTCPPort(set); ok {
		st.DefaultTCPPort = &port
	}
	st.Names = resolve.Names(in.Name, in.Namespace, in.MeshDomain)
	if adopt.foreign && !adopt.adopted {
		// The Kubernetes names reach someone else's Service: only the mesh name is the mesh's.
		// So does the bare name, which the cluster's DNS completes to one of them.
		st.Names = st.Names[:1]
	} else {
		st.LocalName = resolve.LocalName(in.Name)
	}
	st.DialSurface = dialSurface(set, in.Issuer)

	st.Conditions = []metav1.Condition{
		readyCondition(st),
		portsConsistentCondition(st.Ports),
		serviceReadyCondition(in, adopt, st.DialSurface),
		portsCompleteCondition(len(st.Ports)+len(svc.LeftOut), svc.LeftOut),
	}
	st.Conditions = WithSummary(st.Conditions)

	out := Output{Status: st}
	if !adopt.foreign {
		out.Service = generatedService(in, set)
	}
	return out, nil
}

// dialSurface is resolve's dial surface in the API's words, each row once, written for any of
// status.names as <name>.
func dialSurface(set portspec.PortSet, issuer workloadidentity.Issuer) []meshv1alpha1.Dial {
	rows := resolve.DialSurface(set, issuer)
	dials := make([]meshv1alpha1.Dial, 0, len(rows))
	for _, d := range rows {
		// A reason may list ports (the 421 advice names a few): cut it to the field's limit all
		// the same, so no surface can make the status unwritable.
		dial := meshv1alpha1.Dial{Address: d.Address, Protocol: d.Protocol,
			Outcome: d.Outcome, Error: d.Error,
			Reason: conditions.Truncate(d.Reason, meshv1alpha1.MaxDialReason)}
		if d.Port != 0 {
			dial.Port = &d.Port
		}
		dials = append(dials, dial)
	}
	return dials
}

func identityOf(in Input) (string, error) {
	td, err := spiffeid.TrustDomainFromString(in.MeshDomain)
	if err == nil && td.Name() != in.MeshDomain {
		// TrustDomainFromString also takes a SPIFFE ID ("spiffe://aether.internal"): no DNS domain.
		err = fmt.Errorf("it is a SPIFFE ID; the mesh domain is its trust domain, %q", td.Name())
	}
	if err != nil {
		return "", fmt.Errorf("mesh domain %q is not a SPIFFE trust domain: %w", in.MeshDomain, err)
	}
	id, err := spiffeid.FromSegments(td, "ns", in.Namespace, "sa", in.Name)
	if err != nil {
		return "", errors.Join(fmt.Errorf("service %s/%s has no SPIFFE ID", in.Namespace, in.Name), err)
	}
	return id.String(), nil
}

// servicePortOf renders one of the model's ports: the winning pair's protocol and member count,
// Ready from its ready members, and ProtocolConsistent=False naming the counts of every pair when
// the endpoints disagree (the vote itself is the model's).
func servicePortOf(p model.Port) meshv1alpha1.ServicePort {
	won := p.Pairs[0]
	members := int32(len(won.Members))
	sp := meshv1alpha1.ServicePort{Port: p.Number, Protocol: p.Protocol, Endpoints: members}
	if won.Ready > 0 {
		sp.Conditions = append(sp.Conditions, portCondition(meshv1alpha1.PortConditionReady, true, meshv1alpha1.ServiceReasonEndpointsReady,
			fmt.Sprintf("%d of %d endpoints serving port %d as %s are ready", won.Ready, members, p.Number, p.Protocol)))
	} else {
		sp.Conditions = append(sp.Conditions, portCondition(meshv1alpha1.PortConditionReady, false, meshv1alpha1.ServiceReasonNoReadyEndpoints,
			fmt.Sprintf("none of the %d endpoints serving port %d as %s is ready", members, p.Number, p.Protocol)))
	}
	if len(p.Pairs) == 1 {
		sp.Conditions = append(sp.Conditions, portCondition(meshv1alpha1.PortConditionProtocolConsistent, true, meshv1alpha1.ServiceReasonPortsAgree,
			fmt.Sprintf("every endpoint declares port %d as %s", p.Number, p.Protocol)))
	} else {
		sp.Conditions = append(sp.Conditions, portCondition(meshv1alpha1.PortConditionProtocolConsistent, false,
			meshv1alpha1.ServiceReasonProtocolConflict, conflictMessage(p)))
	}
	return sp
}

// conflictMessage names the port, how many endpoints (and how many ready) declare each protocol,
// and which one is reported: "port 9000: 2 endpoints (2 ready) declare TCP, 1 endpoint (1 ready)
// declares HTTP; reported as TCP".
func conflictMessage(p model.Port) string {
	parts := make([]string, len(p.Pairs))
	for i, c := range p.Pairs {
		noun, verb := "endpoints", "declare"
		if len(c.Members) == 1 {
			noun, verb = "endpoint", "declares"
		}
		parts[i] = fmt.Sprintf("%d %s (%d ready) %s %s", len(c.Members), noun, c.Ready, verb, c.Protocol)
	}
	return fmt.Sprintf("port %d: %s; reported as %s (most ready endpoints, then the newer declaration)",
		p.Number, strings.Join(parts, ", "), p.Protocol)
}

func portSetOf(primary int32, ports []meshv1alpha1.ServicePort) portspec.PortSet {
	set := portspec.PortSet{Primary: primary}
	for _, p := range ports {
		set.Ports = append(set.Ports, portspec.Port{Port: p.Port, Protocol: p.Protocol})
	}
	return set
}

// portCondition is a condition without timestamps, its message cut to the field's limit.
func portCondition(t string, ok bool, reason, message string) metav1.Condition {
	status := metav1.ConditionFalse
	if ok {
		status = metav1.ConditionTrue
	}
	return metav1.Condition{Type: t, Status: status, Reason: reason, Message: conditions.Truncate(message, conditions.MaxConditionMessage)}
}

func readyCondition(st meshv1alpha1.MeshServiceStatus) metav1.Condition {
	switch {
	case st.Endpoints.Total == 0:
		return portCondition(meshv1alpha1.ServiceConditionReady, false, meshv1alpha1.ServiceReasonNoEndpoints,
			fmt.Sprintf("no endpoints: ports %s and the VIP are kept as last declared until endpoints return or the ServiceAccount is deleted",
				orNone(st.PortsSummary)))
	case st.Endpoints.Ready == 0:
		return portCondition(meshv1alpha1.ServiceConditionReady, false, meshv1alpha1.ServiceReasonNoReadyEndpoints,
			fmt.Sprintf("0 of %d endpoints are ready", st.Endpoints.Total))
	}
	return portCondition(meshv1alpha1.ServiceConditionReady, true, meshv1alpha1.ServiceReasonEndpointsReady,
		fmt.Sprintf("%d of %d endpoints are ready", st.Endpoints.Ready, st.Endpoints.Total))
}

// portsConsistentCondition joins the conflicts of the listed ports (those left out are not
// reported: they are nowhere in the status).
func portsConsistentCondition(ports []meshv1alpha1.ServicePort) metav1.Condition {
	var conflicts []string
	for _, p := range ports {
		if c := conditions.Find(p.Conditions, meshv1alpha1.PortConditionProtocolConsistent); c != nil && c.Status == metav1.ConditionFalse {
			conflicts = append(conflicts, c.Message)
		}
	}
	if len(conflicts) == 0 {
		return portCondition(meshv1alpha1.ServiceConditionPortsConsistent, true, meshv1alpha1.ServiceReasonPortsAgree,
			"every endpoint declares each port with the same protocol")
	}
	return portCondition(meshv1alpha1.ServiceConditionPortsConsistent, false, meshv1alpha1.ServiceReasonProtocolConflict,
		strings.Join(conflicts, "; "))
}

func serviceReadyCondition(in Input, adopt adoption, surface []meshv1alpha1.Dial) metav1.Condition {
	switch {
	case adopt.adopted:
		return portCondition(meshv1alpha1.ServiceConditionServiceReady, true, meshv1alpha1.ServiceReasonExistingService,
			adoptedMessage(in.Namespace, in.Name, in.Service.Existing, surface))
	case adopt.foreign:
		return portCondition(meshv1alpha1.ServiceConditionServiceReady, false, meshv1alpha1.ServiceReasonNameConflict,
			fmt.Sprintf("Service %s/%s exists and is not the mesh's (no owner reference to this MeshService), and the mesh cannot "+
				"use it read-only: %s. It is left untouched, so the Kubernetes names %s.%s and %s.%s.svc.cluster.local do not reach "+
				"the mesh; fix it as said, or rename or delete that Service",
				in.Namespace, in.Name, adopt.problem, in.Name, in.Namespace, in.Name, in.Namespace))
	}
	return portCondition(meshv1alpha1.ServiceConditionServiceReady, true, meshv1alpha1.ServiceReasonServiceApplied,
		fmt.Sprintf("Service %s/%s carries the dial surface", in.Namespace, in.Name))
}

// maxLeftOutNamed bounds how many left-out ports the PortsComplete message names one by one.
const maxLeftOutNamed = 32

// portsCompleteCondition says whether every declared port is listed; when some are left out it
// names how many were declared, the cap, the rule that chose, and the first left-out ports.
func portsCompleteCondition(declared int, leftOut []int32) metav1.Condition {
	if len(leftOut) == 0 {
		return portCondition(meshv1alpha1.ServiceConditionPortsComplete, true, meshv1alpha1.ServiceReasonAllPortsListed,
			fmt.Sprintf("all %d declared ports are listed (at most %d)", declared, meshv1alpha1.MaxServicePorts))
	}
	named := make([]string, 0, maxLeftOutNamed)
	for _, p := range leftOut[:min(len(leftOut), maxLeftOutNamed)] {
		named = append(named, fmt.Sprint(p))
	}
	list := strings.Join(named, ", ")
	if more := len(leftOut) - len(named); more > 0 {
		list += fmt.Sprintf(" and %d more", more)
	}
	return portCondition(meshv1alpha1.ServiceConditionPortsComplete, false, meshv1alpha1.ServiceReasonTooManyPorts,
		fmt.Sprintf("the endpoints declare %d distinct ports; a service lists at most %d: the %d declared by the most endpoints "+
			"are kept (the primary first, ties to the lower port). Left out of the status, the dial surface and the generated "+
			"Service, so nothing reaches them through the service (%d): %s. Declare fewer ports, or split the workloads "+
			"across ServiceAccounts", declared, meshv1alpha1.MaxServicePorts, meshv1alpha1.MaxServicePorts, len(leftOut), list))
}

// pendingConditions are the conditions whose False means "settling on its own" (Reconciling),
// blockingConditions those whose False means "waiting on a user" (Stalled). Ready=False with
// reason StatusInvalid is blocking: the API server refused the status, and only a change of the
// inputs (or of whatever refused it) can help.
var (
	pendingConditions  = []string{meshv1alpha1.ServiceConditionReady, meshv1alpha1.ServiceConditionPortsConsistent}
	blockingConditions = []string{meshv1alpha1.ServiceConditionServiceReady, meshv1alpha1.ServiceConditionPortsComplete}
)

// WithSummary returns conds with Reconciling and Stalled (re)computed from the others, the two
// conditions kstatus reads (Flux, kstatus-based waits) and config/argocd's health check mirrors:
// a service is Stalled (kstatus Failed) when a condition waits on a user, else Reconciling
// (InProgress) while one settles on its own, else neither (Ready decides: Current). Callers that
// change a condition after Translate (a refused Service or status write) call it again.
func WithSummary(conds []metav1.Condition) []metav1.Condition {
	conds = slices.DeleteFunc(slices.Clone(conds), func(c metav1.Condition) bool {
		return c.Type == meshv1alpha1.ServiceConditionReconciling || c.Type == meshv1alpha1.ServiceConditionStalled
	})
	var pending, blocking []metav1.Condition
	for _, c := range conds {
		switch {
		case c.Status == metav1.ConditionTrue:
		case slices.Contains(blockingConditions, c.Type),
			c.Type == meshv1alpha1.ServiceConditionReady && c.Reason == meshv1alpha1.ServiceReasonStatusInvalid:
			blocking = append(blocking, c)
		case slices.Contains(pendingConditions, c.Type):
			pending = append(pending, c)
		}
	}
	stalled := summaryCondition(meshv1alpha1.ServiceConditionStalled, blocking, meshv1alpha1.ServiceReasonNothingBlocks,
		"no condition waits on a user's action")
	reconciling := summaryCondition(meshv1alpha1.ServiceConditionReconciling, pending, meshv1alpha1.ServiceReasonSettled,
		"endpoints are ready and agree on every port's protocol")
	if len(blocking) > 0 {
		// Stalled wins: kstatus reads the first of the two that is True, so only one may be.
		reconciling = portCondition(meshv1alpha1.ServiceConditionReconciling, false, stalled.Reason,
			"stalled until a user acts (see Stalled)")
	}
	return append(conds, reconciling, stalled)
}

// summaryCondition is True with the first cause's reason and every cause's type, reason and
// message, or False with reason and message when there is no cause.
func summaryCondition(t string, causes []metav1.Condition, reason, message string) metav1.Condition {
	if len(causes) == 0 {
		return portCondition(t, false, reason, message)
	}
	parts := make([]string, len(causes))
	for i, c := range causes {
		parts[i] = fmt.Sprintf("%s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message)
	}
	return portCondition(t, true, causes[0].Reason, strings.Join(parts, "; "))
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
