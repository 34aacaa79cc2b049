// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package plugin

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aether-mesh/aether-operator/internal/proxyconfig"
)

// AgentContainer is the agent's container in its pod (config/agent): its flags are read there.
const AgentContainer = "agent"

// ProxyConfigReport is what proxy-config shows: the pod, the agent it was read from, and the
// agent's answer (its node's published configuration, the pod's part of it).
type ProxyConfigReport struct {
	Agent  string             `json:"agent"`
	Config proxyconfig.Config `json:"config"`
}

// ProxyConfig reads pod namespace/name's part of its node's published proxy configuration from
// the node's agent: it finds the pod and the agent of its node (c), checks that the caller may
// create pods/portforward on the agent's pod and get the pod's path on the agent
// (SelfSubjectAccessReviews, so that a refusal names what to ask for; the agent asks the API
// server the second again, for the credentials it is sent), and asks the agent's endpoint, on its
// metrics port, through get. Each way it can fail is an ExitError that says what to do.
func ProxyConfig(ctx context.Context, c client.Client, namespace, name string, get AgentGet) (*ProxyConfigReport, error) {
	pod := &corev1.Pod{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, pod); err != nil {
		switch {
		case apierrors.IsNotFound(err):
			return nil, &ExitError{Code: ExitUsage, Msg: fmt.Sprintf("pod %s/%s not found", namespace, name)}
		case apierrors.IsForbidden(err):
			return nil, &ExitError{Code: ExitUsage, Msg: fmt.Sprintf("reading pod %s/%s: %v (proxy-config needs get on pods in namespace %s)", namespace, name, err, namespace)}
		}
		return nil, err
	}
	key := namespace + "/" + name
	node := pod.Spec.NodeName
	if node == "" {
		return nil, &ExitError{Code: ExitFound, Msg: fmt.Sprintf("pod %s is not scheduled yet: no node's agent renders it", key)}
	}
	flags := nodeAgent(ctx, c, node)
	if inMesh, why := flags.ignored.Verdict(pod); !inMesh {
		return nil, &ExitError{Code: ExitFound, Msg: fmt.Sprintf("pod %s is not in the mesh (%s): no proxy configuration is rendered for it", key, why)}
	}
	if pod.Spec.HostNetwork {
		return nil, &ExitError{Code: ExitFound, Msg: fmt.Sprintf("pod %s is not in the mesh (it uses the node's network namespace, hostNetwork): no proxy configuration is rendered for it", key)}
	}
	agent, err := agentOf(ctx, c, node)
	if err != nil {
		return nil, err
	}
	agentKey := agent.Namespace + "/" + agent.Name
	port, err := endpointPort(agent)
	if err != nil {
		return nil, err
	}
	path := proxyconfig.PodPath(namespace, name)
	if err := mayPortForward(ctx, c, agent); err != nil {
		return nil, err
	}
	if err := mayRead(ctx, c, path); err != nil {
		return nil, err
	}
	status, body, err := get(ctx, agent, port, path)
	if err != nil {
		if apierrors.IsForbidden(err) || strings.Contains(err.Error(), "403") {
			return nil, &ExitError{Code: ExitUsage, Msg: forbiddenPortForward(agent, err.Error())}
		}
		return nil, &ExitError{Code: ExitUsage, Msg: fmt.Sprintf("reading the agent %s on node %s: %v", agentKey, node, err)}
	}
	switch status {
	case http.StatusUnauthorized:
		return nil, &ExitError{Code: ExitUsage, Msg: fmt.Sprintf("the agent %s did not accept your credentials (%s): it accepts what the API server accepts of a bearer token (TokenReview) or a client certificate of the API server's client CA; your kubeconfig's user sends neither in a form it can check (an authentication proxy's, say)", agentKey, strings.TrimSpace(string(body)))}
	case http.StatusForbidden:
		return nil, &ExitError{Code: ExitUsage, Msg: forbiddenRead(path, strings.TrimSpace(string(body)))}
	}
	if status != http.StatusOK {
		var p proxyconfig.Problem
		msg := strings.TrimSpace(string(body))
		if json.Unmarshal(body, &p) == nil && p.Error != "" {
			msg = p.Error
		}
		code := ExitUsage
		if status == http.StatusNotFound {
			code = ExitFound
		}
		return nil, &ExitError{Code: code, Msg: fmt.Sprintf("the agent %s answered %d: %s", agentKey, status, msg)}
	}
	report := &ProxyConfigReport{Agent: agentKey}
	if err := json.Unmarshal(body, &report.Config); err != nil {
		return nil, fmt.Errorf("reading the answer of the agent %s: %w", agentKey, err)
	}
	return report, nil
}

// agentOf is the ready agent pod of node, or an error naming what is wrong.
func agentOf(ctx context.Context, c client.Reader, node string) (*corev1.Pod, error) {
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.MatchingLabels{nameLabel: AgentLabel}); err != nil {
		if apierrors.IsForbidden(err) {
			return nil, &ExitError{Code: ExitUsage, Msg: fmt.Sprintf("finding the agent of node %s: %v (proxy-config finds it by its label %s=%s: it needs list on pods in every namespace)", node, err, nameLabel, AgentLabel)}
		}
		return nil, fmt.Errorf("finding the agent of node %s: %w", node, err)
	}
	var candidates []*corev1.Pod
	for i := range pods.Items {
		if p := &pods.Items[i]; p.Spec.NodeName == node && p.DeletionTimestamp == nil {
			candidates = append(candidates, p)
		}
	}
	if len(candidates) == 0 {
		return nil, &ExitError{Code: ExitUsage, Msg: fmt.Sprintf("no agent runs on node %s (no pod labelled %s=%s there): nothing renders the node's proxy configuration; is the agent's DaemonSet scheduled there?", node, nameLabel, AgentLabel)}
	}
	for _, p := range candidates {
		if p.Status.Phase == corev1.PodRunning && podReady(p) {
			return p, nil
		}
	}
	p := candidates[0]
	return nil, &ExitError{Code: ExitUsage, Msg: fmt.Sprintf("the agent %s/%s on node %s is not ready (phase %s): it cannot answer yet; kubectl -n %s describe pod %s says why",
		p.Namespace, p.Name, node, cmp.Or(string(p.Status.Phase), "unknown"), p.Namespace, p.Name)}
}

// endpointPort is the port the agent serves the proxy configuration on: its metrics endpoint's
// (--metrics-bind-address, its default when not set), unless it serves none there
// (--proxy-config=false, --metrics-secure=false, --metrics-bind-address=0).
func endpointPort(agent *corev1.Pod) (int, error) {
	value, on, secure := proxyconfig.DefaultMetricsAddress, true, true
	for _, ctr := range agent.Spec.Containers {
		if ctr.Name != AgentContainer {
			continue
		}
		if v, ok := flagValue(ctr, proxyconfig.MetricsAddressFlag); ok {
			value = v
		}
		on = boolFlag(ctr, proxyconfig.Flag, on)
		secure = boolFlag(ctr, proxyconfig.MetricsSecureFlag, secure)
	}
	key := agent.Namespace + "/" + agent.Name
	port, served, err := proxyconfig.MetricsPort(value)
	switch {
	case err != nil:
		return 0, &ExitError{Code: ExitUsage, Msg: fmt.Sprintf("the agent %s: %v", key, err)}
	case !on:
		return 0, &ExitError{Code: ExitUsage, Msg: fmt.Sprintf("the agent %s runs with --%s=false: it serves no proxy configuration; remove the flag (it is on by default)", key, proxyconfig.Flag)}
	case !secure:
		return 0, &ExitError{Code: ExitUsage, Msg: fmt.Sprintf("the agent %s runs with --%s=false: it serves no proxy configuration on a metrics endpoint without authentication; remove the flag", key, proxyconfig.MetricsSecureFlag)}
	case !served:
		return 0, &ExitError{Code: ExitUsage, Msg: fmt.Sprintf("the agent %s runs with --%s=0: it serves no metrics endpoint, where the proxy configuration is; give it an address (%s in config/agent)", key, proxyconfig.MetricsAddressFlag, ":19090")}
	}
	return port, nil
}

// boolFlag is the value of the boolean flag name in ctr's command line (--name, --name=true,
// --name=false), dflt when it is not there or not a boolean.
func boolFlag(ctr corev1.Container, name string, dflt bool) bool {
	out := dflt
	for _, w := range append(slices.Clone(ctr.Command), ctr.Args...) {
		w = "-" + strings.TrimLeft(w, "-")
		if w == "-"+name {
			out = true
		} else if v, ok := strings.CutPrefix(w, "-"+name+"="); ok {
			if b, err := strconv.ParseBool(v); err == nil {
				out = b
			}
		}
	}
	return out
}

// mayRead asks the API server whether the caller may get path, the non-resource URL the agent
// authorizes the request by.
func mayRead(ctx context.Context, c client.Client, path string) error {
	review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: path, Verb: "get"},
	}}
	if err := c.Create(ctx, review); err != nil {
		return fmt.Errorf("asking the API server whether you may get %s: %w", path, err)
	}
	if !review.Status.Allowed {
		return &ExitError{Code: ExitUsage, Msg: forbiddenRead(path, review.Status.Reason)}
	}
	return nil
}

func forbiddenRead(path, reason string) string {
	msg := "you may not get " + path
	if reason != "" {
		msg += ": " + reason
	}
	return msg + "; the node agent serves a pod's proxy configuration to whom the API server allows get on that non-resource URL: ask for a ClusterRoleBinding to the ClusterRole " +
		proxyconfig.ReaderRole + " (aether-operator-" + proxyconfig.ReaderRole + " as config/default and a release named aether-operator name it), or to a ClusterRole of your own granting get on " +
		proxyconfig.Path + "<namespace>/* (kubectl auth can-i get " + path + ")"
}

// mayPortForward asks the API server whether the caller may create pods/portforward on agent.
func mayPortForward(ctx context.Context, c client.Client, agent *corev1.Pod) error {
	review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: agent.Namespace, Verb: "create", Resource: "pods", Subresource: "portforward", Name: agent.Name},
	}}
	if err := c.Create(ctx, review); err != nil {
		return fmt.Errorf("asking the API server whether you may port-forward to the agent %s/%s: %w", agent.Namespace, agent.Name, err)
	}
	if !review.Status.Allowed {
		return &ExitError{Code: ExitUsage, Msg: forbiddenPortForward(agent, review.Status.Reason)}
	}
	return nil
}

func forbiddenPortForward(agent *corev1.Pod, reason string) string {
	msg := fmt.Sprintf("you may not create pods/portforward in namespace %s (on the agent's pod %s)", agent.Namespace, agent.Name)
	if reason != "" {
		msg += ": " + reason
	}
	return msg + "; proxy-config reads the node agent's endpoint through a port-forward the API server authorizes: ask for a Role in " +
		agent.Namespace + " granting verb create on resource pods/portforward (kubectl auth can-i create pods/portforward -n " + agent.Namespace + ")"
}

// WriteProxyConfig writes the report as a summary: the pod's listeners with their filter chains
// (what each matches, what it does), its route configurations' virtual hosts and domains, and its
// clusters with their type, endpoint count and TLS SNI.
func WriteProxyConfig(w io.Writer, r *ProxyConfigReport) error {
	res, err := r.Config.Decode()
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "Pod:    %s\nNode:   %s (agent %s)\n", r.Config.Pod, r.Config.Node, r.Agent)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\nLISTENER\tADDRESS\tCHAIN\tMATCH\tDESTINATION")
	for _, l := range res.Listeners {
		chains := slices.Clone(l.GetFilterChains())
		if d := l.GetDefaultFilterChain(); d != nil {
			chains = append(chains, d)
		}
		for i, fc := range chains {
			name, address := "", ""
			if i == 0 {
				name, address = l.GetName(), socketAddress(l.GetAddress())
			}
			match := chainMatch(fc.GetFilterChainMatch())
			if fc == l.GetDefaultFilterChain() {
				match = "(default)"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", name, address, cmp.Or(fc.GetName(), "-"), match, chainDestination(fc))
		}
	}
	fmt.Fprintln(tw, "\nROUTE CONFIGURATION\tVIRTUAL HOST\tDOMAINS\tROUTES")
	for _, rc := range res.Routes {
		for i, vh := range rc.GetVirtualHosts() {
			name := ""
			if i == 0 {
				name = rc.GetName()
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\n", name, vh.GetName(), listed(vh.GetDomains(), 4), len(vh.GetRoutes()))
		}
	}
	endpoints := map[string]int{}
	for _, e := range res.Endpoints {
		for _, le := range e.GetEndpoints() {
			endpoints[e.GetClusterName()] += len(le.GetLbEndpoints())
		}
	}
	fmt.Fprintln(tw, "\nCLUSTER\tTYPE\tENDPOINTS\tTLS SNI")
	for _, c := range res.Clusters {
		typ, count := clusterType(c), "-"
		switch {
		case c.GetEdsClusterConfig() != nil:
			count = strconv.Itoa(endpoints[cmp.Or(c.GetEdsClusterConfig().GetServiceName(), c.GetName())])
		case c.GetLoadAssignment() != nil:
			n := 0
			for _, le := range c.GetLoadAssignment().GetEndpoints() {
				n += len(le.GetLbEndpoints())
			}
			count = strconv.Itoa(n)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", c.GetName(), typ, count, upstreamSNI(c))
	}
	return tw.Flush()
}

func socketAddress(a *corev3.Address) string {
	sa := a.GetSocketAddress()
	if sa == nil {
		return "-"
	}
	return sa.GetAddress() + ":" + strconv.Itoa(int(sa.GetPortValue()))
}

// chainMatch says what a filter chain matches: destination port and prefixes, SNI, transport and
// application protocols.
func chainMatch(m *listenerv3.FilterChainMatch) string {
	var parts []string
	if p := m.GetDestinationPort(); p != nil {
		parts = append(parts, "port "+strconv.Itoa(int(p.GetValue())))
	}
	var prefixes []string
	for _, r := range m.GetPrefixRanges() {
		prefixes = append(prefixes, r.GetAddressPrefix()+"/"+strconv.Itoa(int(r.GetPrefixLen().GetValue())))
	}
	if len(prefixes) > 0 {
		parts = append(parts, "to "+listed(prefixes, 3))
	}
	if len(m.GetServerNames()) > 0 {
		parts = append(parts, "sni "+listed(m.GetServerNames(), 3))
	}
	if t := m.GetTransportProtocol(); t != "" {
		parts = append(parts, t)
	}
	if len(m.GetApplicationProtocols()) > 0 {
		parts = append(parts, "alpn "+listed(m.GetApplicationProtocols(), 3))
	}
	if len(parts) == 0 {
		return "any"
	}
	return strings.Join(parts, ", ")
}

// chainDestination says where a chain's terminal filter sends: a tcp_proxy's cluster(s), an HCM's
// route configuration (the filters before it, which set state, are not shown).
func chainDestination(fc *listenerv3.FilterChain) string {
	var out []string
	for _, f := range fc.GetFilters() {
		inner, err := f.GetTypedConfig().UnmarshalNew()
		if err != nil {
			out = append(out, f.GetName())
			continue
		}
		switch v := inner.(type) {
		case *tcpproxyv3.TcpProxy:
			if c := v.GetCluster(); c != "" {
				out = append(out, "tcp → "+c)
			} else {
				var names []string
				for _, w := range v.GetWeightedClusters().GetClusters() {
					names = append(names, w.GetName())
				}
				out = append(out, "tcp → "+listed(names, 3))
			}
		case *hcmv3.HttpConnectionManager:
			if rds := v.GetRds(); rds != nil {
				out = append(out, "http → routes "+rds.GetRouteConfigName())
			} else {
				out = append(out, "http → inline routes "+v.GetRouteConfig().GetName())
			}
		}
	}
	if len(out) == 0 { // no filter that sends anywhere: name them
		for _, f := range fc.GetFilters() {
			out = append(out, f.GetName())
		}
	}
	return strings.Join(out, "; ")
}

func clusterType(c *clusterv3.Cluster) string {
	if ct := c.GetClusterType(); ct != nil {
		return ct.GetName()
	}
	return c.GetType().String()
}

// upstreamSNI is the SNI a cluster's upstream TLS sends, "-" for plaintext.
func upstreamSNI(c *clusterv3.Cluster) string {
	ts := c.GetTransportSocket()
	if ts == nil {
		return "-"
	}
	tls := &tlsv3.UpstreamTlsContext{}
	if err := ts.GetTypedConfig().UnmarshalTo(tls); err != nil {
		return ts.GetName()
	}
	return cmp.Or(tls.GetSni(), "(tls, no sni)")
}

// listed is items joined by commas, at most n of them and how many more.
func listed(items []string, n int) string {
	if len(items) <= n {
		return strings.Join(items, ",")
	}
	return strings.Join(items[:n], ",") + fmt.Sprintf(" (+%d)", len(items)-n)
}
