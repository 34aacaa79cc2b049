// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package plugin

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1 "github.com/aether-mesh/aether-operator/api/config/v1"
	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/authz"
	"github.com/aether-mesh/aether-operator/internal/meshservice"
	"github.com/aether-mesh/aether-operator/internal/portspec"
	"github.com/aether-mesh/aether-operator/internal/resolve"
	"github.com/aether-mesh/aether-operator/internal/workloadidentity"
)

// DialReport is what kubectl aether dial answers.
type DialReport struct {
	Spelling Spelling   `json:"spelling"`
	Service  ServiceRef `json:"service"`
	// Names are the names that reach the service (resolve.Names).
	Names []string `json:"names"`
	// Answer is internal/resolve's: the port and protocol reached, or the refusal or 421.
	Answer resolve.Result `json:"answer"`
	// Port is the reached port's status and endpoints; nil when no port is reached.
	Port *PortReport `json:"port,omitempty"`
	// Routes are the routes that name the reached port (or, for a request through the proxy port
	// without --host, the whole service).
	Routes []AttachedRoute `json:"routes,omitempty"`
	// From is what the pod of --from does with the dial; nil without --from.
	From *FromReport `json:"from,omitempty"`
	// Access is what the AccessPolicies make of the reached port; nil when no port is reached.
	Access *AccessReport `json:"access,omitempty"`
}

// AccessReport is the reached port's AccessPolicies (internal/authz's reading) and, with --from,
// their answer to the pod's call.
type AccessReport struct {
	// Policies govern the port; none: it is open to every mesh identity.
	Policies []string `json:"policies,omitempty"`
	// Caller is the --from pod's mesh identity; Admitted and Rule the policies' answer to its
	// call (Rule empty when the port is open or the call denied).
	Caller   string `json:"caller,omitempty"`
	Admitted *bool  `json:"admitted,omitempty"`
	Rule     string `json:"rule,omitempty"`
	// Unknown says why the policies could not be read (e.g. not allowed to list them).
	Unknown string `json:"unknown,omitempty"`
}

// AccessMethod is the method dial decides an HTTP request's access for.
const AccessMethod = "GET"

// PortReport is one port of a service: as the MeshService status reports it, and its endpoints
// by declared protocol.
type PortReport struct {
	Port     int32                 `json:"port"`
	Protocol meshv1alpha1.Protocol `json:"protocol"`
	// Endpoints counts the endpoints in the reported protocol (the MeshService status).
	Endpoints int32 `json:"endpoints"`
	// ByProtocol counts the verified endpoints by the protocol they declare the port in: more
	// than one entry while they disagree.
	ByProtocol []ProtocolCount    `json:"byProtocol,omitempty"`
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Refused is whether a client gets no port: refused, 421 or 400; or, with --from, whether the
// pod's connection does not reach the mesh at all.
func (r DialReport) Refused() bool {
	if r.From != nil && !r.From.ReachesProxy {
		return true
	}
	if r.Access != nil && r.Access.Admitted != nil && !*r.Access.Admitted {
		return true
	}
	return r.Answer.Outcome != resolve.Reaches && r.Answer.Outcome != resolve.HostDecides
}

// PortSetOf is the port set the MeshService status describes, as internal/resolve reads it.
func PortSetOf(st meshv1alpha1.MeshServiceStatus) portspec.PortSet {
	ports := make([]portspec.Port, 0, len(st.Ports))
	for _, p := range st.Ports {
		ports = append(ports, portspec.Port{Port: p.Port, Protocol: p.Protocol})
	}
	return portspec.NewPortSet(st.PrimaryPort, ports)
}

// IssuerOf is the identity issuer st was written under, as far as its dial surface tells: none
// when it refuses a declared TCP port (meshservice.RefusedTCPPorts), which only a mesh without an
// issuer does; else spire. (A service without a TCP port has the same surface under both.)
func IssuerOf(st meshv1alpha1.MeshServiceStatus) workloadidentity.Issuer {
	if len(meshservice.RefusedTCPPorts(st)) > 0 {
		return workloadidentity.NoIssuer
	}
	return workloadidentity.SPIRE
}

// Answer is what s reaches on the service whose ports are set in a mesh whose identities issuer
// issues: resolve.HTTPRequest for an HTTP request, else the dial surface's row for the spelling
// (resolve.DialSurface), written for the host dialled.
func Answer(set portspec.PortSet, issuer workloadidentity.Issuer, s Spelling) resolve.Result {
	if s.HTTP {
		return resolve.HTTPRequest(set, s.Authority)
	}
	address := resolve.ConnectionAddress(set, s.Port, s.UDP)
	if s.TLS {
		address = "https://" + resolve.NamePlaceholder + "/"
	}
	for _, row := range resolve.DialSurface(set, issuer) {
		if row.Address == address {
			return row.For(s.Host).Result
		}
	}
	panic("resolve.DialSurface has no row " + address) // every surface has these rows
}

// Explain answers a dial from what the cluster holds: the MeshService, its endpoints and the
// routes.
func Explain(s Spelling, svc ServiceRef, ms *meshv1alpha1.MeshService, eps []meshv1alpha1.MeshEndpoint,
	allRoutes []RouteRef, meshDomain string) DialReport {
	r := DialReport{Spelling: s, Service: svc, Names: resolve.Names(svc.Name, svc.Namespace, meshDomain)}
	r.Answer = Answer(PortSetOf(ms.Status), IssuerOf(ms.Status), s)
	switch r.Answer.Outcome {
	case resolve.Reaches:
		r.Port = portReport(ms.Status, r.Answer.Port, endpointsByProtocol(eps, svc.Name))
		r.Routes = attached(allRoutes, svc, r.Answer.Port)
	case resolve.HostDecides:
		r.Routes = attached(allRoutes, svc, 0)
	}
	return r
}

func portReport(st meshv1alpha1.MeshServiceStatus, port int32, counts map[int32][]ProtocolCount) *PortReport {
	pr := &PortReport{Port: port, ByProtocol: counts[port]}
	for _, p := range st.Ports {
		if p.Port == port {
			pr.Protocol, pr.Endpoints, pr.Conditions = p.Protocol, p.Endpoints, p.Conditions
		}
	}
	// The protocol the port is reported in first, then the others by name.
	pr.ByProtocol = slices.Clone(pr.ByProtocol)
	slices.SortStableFunc(pr.ByProtocol, func(a, b ProtocolCount) int {
		return cmp.Compare(boolRank(a.Protocol != pr.Protocol), boolRank(b.Protocol != pr.Protocol))
	})
	return pr
}

func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Dial gathers what Explain reads from the cluster; with from (a pod, <name> in namespace or
// <namespace>/<name>), what that pod's own table does with the dial (From).
func Dial(ctx context.Context, c client.Reader, s Spelling, namespace, meshDomain, from string) (DialReport, error) {
	svc, ms, eps, err := meshService(ctx, c, s.Host, namespace, meshDomain)
	if err != nil {
		return DialReport{}, err
	}
	all, err := listRoutes(ctx, c, "")
	if apierrors.IsForbidden(err) { // routes of other namespaces are not ours to read: this one's
		all, err = listRoutes(ctx, c, svc.Namespace)
	}
	if err != nil {
		return DialReport{}, err
	}
	r := Explain(s, svc, ms, eps, all, meshDomain)
	if from == "" {
		if r.Answer.Outcome == resolve.Reaches {
			r.Access = access(ctx, c, s, svc, ms, r.Answer.Port, nil, meshDomain)
		}
		return r, nil
	}
	pod, err := fromPod(ctx, c, from, namespace)
	if err != nil {
		return DialReport{}, err
	}
	var proxyMS *meshv1alpha1.MeshService
	var proxyEps []meshv1alpha1.MeshEndpoint
	if s.Proxied && s.ProxyHost != "" {
		if _, proxyMS, proxyEps, err = meshService(ctx, c, s.ProxyHost, namespace, meshDomain); err != nil {
			return DialReport{}, err
		}
	}
	report := From(ctx, c, pod, ConnectionOf(s, ms, eps, proxyMS, proxyEps), meshDomain)
	if s.UDP && report.InMesh {
		// The pod's table captures TCP only: what it does with a TCP connection to the port is
		// not what it does with datagrams.
		report.ReachesProxy, report.Rule = false, ""
		if report.Destination != "" {
			report.Destination += resolve.UDPSuffix
		}
		report.Why = "UDP is not yet carried by the node proxy: the pod's table captures TCP only, so its datagrams leave it " +
			"directly, as if there were no mesh, and the mesh's answer does not apply"
	}
	r.From = &report
	if r.Answer.Outcome == resolve.Reaches {
		// The policies decide only a call that reaches the node's proxy, which presents the pod's
		// identity; a connection that leaves the pod directly is no mesh call.
		caller := pod
		if !report.ReachesProxy {
			caller = nil
		}
		r.Access = access(ctx, c, s, svc, ms, r.Answer.Port, caller, meshDomain)
	}
	return r, nil
}

// access reads the AccessPolicies of svc's namespace and says what they make of port, and of
// pod's call to it when pod is given (an HTTP request as AccessMethod of s.Path).
func access(ctx context.Context, c client.Reader, s Spelling, svc ServiceRef, ms *meshv1alpha1.MeshService, port int32, pod *corev1.Pod, meshDomain string) *AccessReport {
	var policies configv1.AccessPolicyList
	if err := c.List(ctx, &policies, client.InNamespace(svc.Namespace)); err != nil {
		return &AccessReport{Unknown: fmt.Sprintf("listing AccessPolicies in %s: %v", svc.Namespace, err)}
	}
	declared := make([]meshv1alpha1.PortProtocol, len(ms.Status.Ports))
	for i, p := range ms.Status.Ports {
		declared[i] = meshv1alpha1.PortProtocol{Port: p.Port, Protocol: p.Protocol}
	}
	ports, _ := authz.Ports(meshDomain, authz.Service{Namespace: svc.Namespace, Name: svc.Name, Ports: declared}, policies.Items)
	i := slices.IndexFunc(ports, func(p authz.Port) bool { return p.Port == port })
	if i < 0 {
		return &AccessReport{}
	}
	report := &AccessReport{Policies: ports[i].Policies}
	if pod != nil {
		report.Caller = authz.IdentityOf(meshDomain, pod.Namespace, cmp.Or(pod.Spec.ServiceAccountName, "default"))
		admitted, by := authz.Decide(meshDomain, ports[i], authz.Call{Caller: report.Caller, Method: AccessMethod, Path: cmp.Or(s.Path, "/")})
		report.Admitted = &admitted
		if by != nil {
			report.Rule = by.Name()
		}
	}
	return report
}

// meshService reads the MeshService host names, and the endpoints of its namespace.
func meshService(ctx context.Context, c client.Reader, host, namespace, meshDomain string) (ServiceRef, *meshv1alpha1.MeshService, []meshv1alpha1.MeshEndpoint, error) {
	svc, err := ServiceOf(host, namespace, meshDomain)
	if err != nil {
		return ServiceRef{}, nil, nil, err
	}
	ms := &meshv1alpha1.MeshService{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: svc.Namespace, Name: svc.Name}, ms); err != nil {
		if apierrors.IsNotFound(err) {
			return ServiceRef{}, nil, nil, &ExitError{Code: ExitFound, Msg: fmt.Sprintf(
				"no MeshService %s/%s: no pods of ServiceAccount %s in namespace %s are in the mesh, so %s names nothing the mesh serves",
				svc.Namespace, svc.Name, svc.Name, svc.Namespace, host)}
		}
		return ServiceRef{}, nil, nil, err
	}
	var eps meshv1alpha1.MeshEndpointList
	if err := c.List(ctx, &eps, client.InNamespace(svc.Namespace)); err != nil {
		return ServiceRef{}, nil, nil, fmt.Errorf("listing MeshEndpoints in %s: %w", svc.Namespace, err)
	}
	return svc, ms, eps.Items, nil
}

// fromPod reads the pod --from names: <name> in namespace, or <namespace>/<name>.
func fromPod(ctx context.Context, c client.Reader, from, namespace string) (*corev1.Pod, error) {
	key := client.ObjectKey{Namespace: namespace, Name: from}
	if ns, name, ok := strings.Cut(from, "/"); ok {
		key = client.ObjectKey{Namespace: ns, Name: name}
	}
	pod := &corev1.Pod{}
	if err := c.Get(ctx, key, pod); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, &ExitError{Code: ExitUsage, Msg: fmt.Sprintf("--from %s: no pod %s in namespace %s (write <name> for a pod of the current namespace, or <namespace>/<name>)", from, key.Name, key.Namespace)}
		}
		return nil, fmt.Errorf("--from %s: reading pod %s/%s: %w", from, key.Namespace, key.Name, err)
	}
	return pod, nil
}

// WriteDial prints the report as text.
func WriteDial(w io.Writer, r DialReport) error {
	var b strings.Builder
	line := func(label, format string, args ...any) {
		fmt.Fprintf(&b, "%-11s %s\n", label+":", fmt.Sprintf(format, args...))
	}
	what := fmt.Sprintf("a connection to port %d", r.Spelling.Port)
	switch {
	case r.Spelling.UDP:
		what = fmt.Sprintf("UDP datagrams to port %d", r.Spelling.Port)
	case r.Spelling.HTTP:
		what = "an HTTP request with Host: " + r.Spelling.Authority
	case r.Spelling.TLS:
		what = "a TLS connection to port 443 (TLS the application terminates)"
	}
	line("Dial", "%s (%s)", r.Spelling.Written, what)
	line("Service", "%s/%s (names: %s)", r.Service.Namespace, r.Service.Name, strings.Join(r.Names, ", "))
	if f := r.From; f != nil {
		writeFrom(line, f)
	}
	a := r.Answer
	switch a.Outcome {
	case resolve.Reaches:
		line("Reaches", "port %d, %s", a.Port, a.Protocol)
	case resolve.HostDecides:
		line("Reaches", "no port by itself: each request's Host header decides (ask with --host <name>:<port>)")
	case resolve.Refused:
		line("Refused", "the connection is refused (ECONNREFUSED)")
	case resolve.Misdirected, resolve.BadRequest:
		line("Answer", "HTTP %d from the mesh, %s: %s", resolve.HTTPStatus(a.Outcome), resolve.ErrorHeader, a.Error)
	}
	line("Why", "%s", a.Reason)
	if a.Body != "" {
		fmt.Fprintf(&b, "Body:\n")
		for l := range strings.SplitSeq(strings.TrimSuffix(a.Body, "\n"), "\n") {
			fmt.Fprintf(&b, "  %s\n", l)
		}
	}
	if p := r.Port; p != nil {
		line("Endpoints", "%s", endpointsText(p))
		for _, c := range p.Conditions {
			line("Port", "%s", conditionText(c))
		}
	}
	if r.Access != nil {
		line("Access", "%s", accessText(r.Access, r.Spelling, a.Protocol))
	}
	if a.Outcome == resolve.Reaches || a.Outcome == resolve.HostDecides {
		if len(r.Routes) == 0 {
			line("Routes", "none")
		}
		for _, rt := range r.Routes {
			line("Route", "%s", routeText(rt))
			for _, c := range rt.Conditions {
				fmt.Fprintf(&b, "%-11s   %s\n", "", conditionText(c))
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// accessText is the Access line: open, governed, or the policies' answer to --from's call.
func accessText(a *AccessReport, s Spelling, protocol meshv1alpha1.Protocol) string {
	governed := "governed by " + strings.Join(a.Policies, ", ")
	call := "a connection"
	if s.HTTP {
		call = AccessMethod + " " + cmp.Or(s.Path, "/")
	}
	switch {
	case a.Unknown != "":
		return "unknown: " + a.Unknown
	case a.Admitted == nil && len(a.Policies) == 0:
		return "open: no AccessPolicy governs the port"
	case a.Admitted == nil:
		return governed + ": only what their rules admit reaches it (--from <pod> decides a caller)"
	case len(a.Policies) == 0:
		return "open: no AccessPolicy governs the port, so " + a.Caller + " reaches it"
	case *a.Admitted:
		return fmt.Sprintf("admitted: %s for %s (%s) by rule %s", governed, a.Caller, call, a.Rule)
	case protocol.IsHTTP():
		return fmt.Sprintf("denied: %s, and no rule admits %s (%s): the mesh answers HTTP 403, %s: %s", governed, a.Caller, call, resolve.ErrorHeader, authz.DeniedError)
	}
	return fmt.Sprintf("denied: %s, and no rule admits %s: the mesh closes the connection before any byte of it reaches the application", governed, a.Caller)
}

// endpointsText is "HTTP 3/3 ready", or during a conflict "TCP 2/2 ready, HTTP 0/1 ready (the
// endpoints disagree: reported as TCP, N endpoints)".
func endpointsText(p *PortReport) string {
	if len(p.ByProtocol) == 0 {
		return fmt.Sprintf("none verified (the status reports %d)", p.Endpoints)
	}
	parts := make([]string, len(p.ByProtocol))
	for i, c := range p.ByProtocol {
		parts[i] = fmt.Sprintf("%s %d/%d ready", c.Protocol, c.Ready, c.Total)
	}
	s := strings.Join(parts, ", ")
	if len(p.ByProtocol) > 1 {
		s += fmt.Sprintf(" (the endpoints disagree: the port is reported as %s)", p.Protocol)
	}
	return s
}

func conditionText(c metav1.Condition) string {
	s := fmt.Sprintf("%s=%s %s", c.Type, c.Status, c.Reason)
	if c.Message != "" {
		s += ": " + c.Message
	}
	return s
}

func routeText(rt AttachedRoute) string {
	on := "the whole service"
	if rt.Port != 0 {
		on = fmt.Sprintf("port %d", rt.Port)
	}
	s := fmt.Sprintf("%s %s/%s (%s, %s)", rt.Kind, rt.Namespace, rt.Name, rt.Via, on)
	if len(rt.Conditions) == 0 {
		s += ": no status from the mesh's controller yet"
	}
	return s
}
