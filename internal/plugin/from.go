// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package plugin

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/capture"
	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/portspec"
	"github.com/aether-mesh/aether-operator/internal/registration"
	"github.com/aether-mesh/aether-operator/internal/workloadidentity"
)

// AgentLabel is the label (app.kubernetes.io/name) of the node agent's pods (config/agent): dial
// --from reads the flags of the agent on the pod's node from its pod.
const AgentLabel = "aether-agent"

// FromReport is what one pod's own data plane does with a dial: whether the pod is in the mesh,
// the identity its connections present, its capture mode and what its table (internal/capture,
// the rules the agent programs) does with the connection.
type FromReport struct {
	Pod  string `json:"pod"`
	Node string `json:"node,omitempty"`
	// InMesh is whether the agent takes the pod (registration.IgnoredNamespaces.InMesh); NotInMesh
	// says why not.
	InMesh    bool   `json:"inMesh"`
	NotInMesh string `json:"notInMesh,omitempty"`
	// Identity is the SPIFFE ID the pod's proxy presents for it (its ServiceAccount's).
	Identity string `json:"identity,omitempty"`
	// CaptureMode is the pod's mode and ModeFrom where it comes from (its annotation, or the flag
	// of its node's agent, or the agent's default when that agent could not be read).
	CaptureMode model.CaptureMode `json:"captureMode,omitempty"`
	ModeFrom    string            `json:"modeFrom,omitempty"`
	// Destination is the address the pod connects to: the service's VIP and the port; empty for a
	// request to the pod's own proxy port on loopback, or when the service has no VIP.
	Destination string `json:"destination,omitempty"`
	// ReachesProxy is whether the connection reaches the node's proxy (the pod's table redirects it,
	// by Rule, or it dials the proxy port on loopback), so that the mesh's answer applies.
	ReachesProxy bool   `json:"reachesProxy"`
	Rule         string `json:"rule,omitempty"`
	// Why says what happens to the connection, in words.
	Why string `json:"why"`
}

// agentFlags are the flags of the node agent that decide what a pod's table holds.
type agentFlags struct {
	captureMode model.CaptureMode
	ignored     registration.IgnoredNamespaces
	from        string // where they were read
}

// nodeAgent reads the flags of the agent running on node from its pod's arguments; without a
// readable agent pod, the agent's defaults, and from says so.
func nodeAgent(ctx context.Context, c client.Reader, node string) agentFlags {
	ignored, err := registration.ParseIgnoredNamespaces(strings.Join(registration.DefaultIgnoredNamespaces, ","))
	if err != nil {
		panic(err) // the defaults are namespace names
	}
	defaults := agentFlags{captureMode: model.CaptureSurface, ignored: ignored}
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.MatchingLabels{nameLabel: AgentLabel}); err != nil {
		reason := err.Error()
		if apierrors.IsForbidden(err) {
			reason = "you may not list pods in every namespace"
		}
		defaults.from = "the agent's default: its pod on node " + node + " could not be read (" + reason + ")"
		return defaults
	}
	i := slices.IndexFunc(pods.Items, func(p corev1.Pod) bool { return p.Spec.NodeName == node })
	if i < 0 {
		defaults.from = "the agent's default: no agent pod runs on node " + node
		return defaults
	}
	agent := &pods.Items[i]
	out := defaults
	out.ignored = defaults.ignored.With(agent.Namespace)
	out.from = fmt.Sprintf("the default of the agent %s/%s on node %s (no --capture-mode)", agent.Namespace, agent.Name, node)
	for _, ctr := range agent.Spec.Containers {
		if v, ok := flagValue(ctr, "capture-mode"); ok {
			out.from = fmt.Sprintf("--capture-mode of the agent %s/%s on node %s", agent.Namespace, agent.Name, node)
			if mode, err := model.ParseCaptureMode(v); err == nil {
				out.captureMode = mode
			}
		}
		if v, ok := flagValue(ctr, "ignored-namespaces"); ok {
			if ignored, err := registration.ParseIgnoredNamespaces(v); err == nil {
				out.ignored = ignored.With(agent.Namespace)
			}
		}
	}
	return out
}

// flagValue is the value of --name in ctr's command and arguments (--name=v or --name v), the
// last one winning as for Go's flag package.
func flagValue(ctr corev1.Container, name string) (string, bool) {
	words := append(slices.Clone(ctr.Command), ctr.Args...)
	value, found := "", false
	for i, w := range words {
		w = "-" + strings.TrimLeft(w, "-")
		switch {
		case strings.HasPrefix(w, "-"+name+"="):
			value, found = strings.TrimPrefix(w, "-"+name+"="), true
		case w == "-"+name && i+1 < len(words):
			value, found = words[i+1], true
		}
	}
	return value, found
}

// Connection is where a dial connects: the service whose VIP it dials (with its endpoints) and
// the port. Service is nil for the pod's own proxy on loopback (--host without a name).
type Connection struct {
	Service   *meshv1alpha1.MeshService
	Endpoints []meshv1alpha1.MeshEndpoint
	Host      string // the name dialled, for the advice
	Port      int32
}

// ConnectionOf is where spelling s connects, given the service it names (ms, eps) and, for a
// request through the proxy port to a name, that name's service (proxyMS, proxyEps).
func ConnectionOf(s Spelling, ms *meshv1alpha1.MeshService, eps []meshv1alpha1.MeshEndpoint,
	proxyMS *meshv1alpha1.MeshService, proxyEps []meshv1alpha1.MeshEndpoint) Connection {
	switch {
	case s.Proxied && s.ProxyHost == "":
		return Connection{Port: meshv1alpha1.MeshHTTPPort}
	case s.Proxied:
		return Connection{Service: proxyMS, Endpoints: proxyEps, Host: s.ProxyHost, Port: meshv1alpha1.MeshHTTPPort}
	}
	return Connection{Service: ms, Endpoints: eps, Host: s.Host, Port: dialledPort(s)}
}

// From explains what pod's own table does with connection to: the table is built as the pod's
// node agent builds it (capture.Build, from the service as model.BuildServices sees it) and the
// connection run through it (capture.Ruleset.Evaluate).
func From(ctx context.Context, c client.Reader, pod *corev1.Pod, to Connection, meshDomain string) FromReport {
	r := FromReport{Pod: pod.Namespace + "/" + pod.Name, Node: pod.Spec.NodeName}
	if pod.Spec.NodeName == "" {
		r.Why = "the pod is not scheduled yet: no node's agent has programmed it"
		return r
	}
	agent := nodeAgent(ctx, c, pod.Spec.NodeName)
	inMesh, why := agent.ignored.Verdict(pod)
	if r.InMesh = inMesh; !inMesh {
		r.NotInMesh = why
		r.Why = "the pod is not in the mesh (" + r.NotInMesh + "): its connections leave it directly, as if there were no mesh, and the mesh's answer does not apply"
		return r
	}
	if pod.Spec.HostNetwork {
		r.InMesh, r.NotInMesh = false, "it uses the node's network namespace (hostNetwork)"
		r.Why = "the pod is not in the mesh (" + r.NotInMesh + "): no table captures its connections"
		return r
	}
	if td, err := spiffeid.TrustDomainFromString(meshDomain); err == nil {
		if id, err := workloadidentity.ServiceAccountID(td, pod.Namespace, serviceAccount(pod)); err == nil {
			r.Identity = id.String()
		}
	}
	r.CaptureMode, r.ModeFrom = agent.captureMode, agent.from
	if v, set := pod.Annotations[model.AnnotationCaptureMode]; set {
		if mode, err := model.ParseCaptureMode(v); err == nil {
			r.CaptureMode, r.ModeFrom = mode, "the pod's annotation "+model.AnnotationCaptureMode
		} else {
			r.ModeFrom += "; the pod's annotation " + model.AnnotationCaptureMode + " is invalid (" + err.Error() + ") and ignored"
		}
	}

	if to.Service == nil {
		r.ReachesProxy = true
		r.Why = fmt.Sprintf("the request goes to the pod's own proxy on 127.0.0.1:%d (loopback is never redirected: the proxy listens there, in the pod), which presents %s",
			meshv1alpha1.MeshHTTPPort, r.Identity)
		return r
	}
	vip, err := netip.ParseAddr(to.Service.Status.VIP)
	if err != nil {
		r.Why = fmt.Sprintf("the service %s/%s has no VIP (status.vip %q): %s does not resolve to a mesh address",
			to.Service.Namespace, to.Service.Name, to.Service.Status.VIP, to.Host)
		return r
	}
	dst := netip.AddrPortFrom(vip, uint16(to.Port))
	r.Destination = dst.String()

	local := model.LocalPod{Namespace: pod.Namespace, Name: pod.Name, UID: string(pod.UID), Capture: r.CaptureMode}
	if spec, err := portspec.Parse(pod.Annotations); err == nil {
		local.ExcludeOutboundPorts, local.Upstreams = spec.ExcludeOutboundPorts, spec.Upstreams
	}
	mesh := model.Mesh{Domain: meshDomain, Issuer: IssuerOf(to.Service.Status),
		Services: model.BuildServices([]meshv1alpha1.MeshService{*to.Service}, to.Endpoints)}
	d := capture.Build(mesh, local, capture.Options{}).Evaluate(capture.Connection{Proto: capture.ProtoTCP, Dst: dst})
	r.ReachesProxy = d.Redirected()
	if d.Rule != nil {
		r.Rule = d.Rule.String()
	}
	switch {
	case r.ReachesProxy:
		r.Why = fmt.Sprintf("the pod's table redirects %s to the node's proxy, which presents %s: the mesh's answer applies", dst, r.Identity)
	case d.Rule != nil && d.Rule.Match.Kind == capture.MatchDport:
		r.Why = fmt.Sprintf("port %d is never redirected (%s, or a port of the proxy's own): the connection leaves the pod directly to %s, as if there were no mesh, and the mesh's answer does not apply",
			to.Port, portspec.AnnotationExcludeOutboundPorts, dst)
	case r.CaptureMode == model.CaptureScoped:
		r.Why = fmt.Sprintf("scoped capture redirects only the mesh ports %d and %d: the connection leaves the pod directly to %s (the Kubernetes Service's routing, no mTLS), and the mesh's answer does not apply; dial %s:%d, or send the request through port %d, to use the mesh",
			meshv1alpha1.MeshHTTPPort, meshv1alpha1.MeshTCPPort, dst, to.Host, meshv1alpha1.MeshTCPPort, meshv1alpha1.MeshHTTPPort)
	default:
		r.Why = fmt.Sprintf("%s is not on the service's dial surface as the pod's table holds it (%s mode): the connection leaves the pod directly, as if there were no mesh", dst, r.CaptureMode)
	}
	return r
}

// dialledPort is the port the spelling connects to: an HTTP request's authority's port (80 when
// it has none), 443 for TLS, else the connection's.
func dialledPort(s Spelling) int32 {
	switch {
	case s.HTTP:
		if _, p, ok := strings.Cut(s.Authority, ":"); ok {
			var n int32
			if _, err := fmt.Sscan(p, &n); err == nil {
				return n
			}
		}
		return 80
	case s.TLS:
		return 443
	}
	return s.Port
}

func serviceAccount(pod *corev1.Pod) string {
	if pod.Spec.ServiceAccountName != "" {
		return pod.Spec.ServiceAccountName
	}
	return "default"
}

// writeFrom writes the --from lines of the dial's text.
func writeFrom(line func(label, format string, args ...any), f *FromReport) {
	switch {
	case f.Node == "":
		line("From", "pod %s, not scheduled", f.Pod)
	case !f.InMesh:
		line("From", "pod %s on node %s, not in the mesh", f.Pod, f.Node)
	default:
		line("From", "pod %s on node %s, identity %s", f.Pod, f.Node, f.Identity)
		line("Capture", "%s (%s)", f.CaptureMode, f.ModeFrom)
	}
	if f.Destination != "" {
		verdict := "leaves the pod directly: no rule of its table matches"
		switch {
		case f.ReachesProxy:
			verdict = "redirected to the node's proxy by: " + f.Rule
		case f.Rule != "":
			verdict = "leaves the pod directly, by: " + f.Rule
		}
		line("Connects", "%s, %s", f.Destination, verdict)
	}
	line("From pod", "%s", f.Why)
}
