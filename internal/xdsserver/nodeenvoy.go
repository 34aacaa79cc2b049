// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdsserver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/aether-mesh/aether-operator/internal/proxyless"
)

// The node's socket (Options.Listener) serves the node's Envoy, and no one else: its ADS stream
// carries every local pod's private key by SDS, and what is streamed to its access log service
// becomes the agent's request metrics. No pod is given the socket (it is in a host directory only
// the node Envoy's pods mount, 0660 for their group), but a socket answers wherever it is reached
// (a hostPath a pod was allowed, a bind mount), and a tenant may run as uid 0 and in any group.
// So the server learns each connection's caller from the kernel, as on the proxyless socket
// (peer.go: SO_PEERCRED, SO_PEERPIDFD, the process's cgroup, the pod UID it names), and serves a
// stream, of any method (ADS, delta, the access log: a gRPC interceptor), only when that caller
// is the node's Envoy (NodeEnvoy). Any other is refused with PermissionDenied saying who it is and
// why, counted (aether_agent_xds_node_refused_total{reason}) and logged once per caller and
// reason (again at V(1)).
//
// The node's Envoy is told by its pod: a pod of this node, in the namespace and with the labels of
// the node Envoy's DaemonSet (config/envoy), as the agent's cache of its node's pods holds it. The
// pod is the API server's record, under its RBAC: only who may create pods in the operator's
// namespace (the cluster admin) can make one. A tenant chooses its own pods' labels, but only in
// its namespaces, and cannot choose its process's cgroup, which names the pod: moving a process
// needs write access to the cgroup file system, which a container has read-only. Neither uid nor
// group tells the node's Envoy apart (it runs as uid 0, as a tenant may; a pod chooses its groups).
// A process of the node itself, in no pod (an Envoy run by hand or by a service manager on a
// development node, the live Envoy tier's), is served only when told so (NodeEnvoy.Host).
//
// What this gate cannot refuse is the node's Envoy itself, made to connect here for a tenant (a
// tenant's socket file in its csi.aether.io directory standing for this socket, which Envoy
// delivers the tenant's inbound to): that is kept out where Envoy connects. Those directories are
// mounted nosymfollow (internal/csinode), and a tenant cannot bind-mount or hard-link a socket it
// cannot see (a link does not cross file systems either).

// NodeEnvoy says which callers of the node's socket are the node's Envoy.
type NodeEnvoy struct {
	// Namespace and Pods: a process of a pod of this node (ResolvePodsWith) in Namespace whose
	// labels Pods selects: the node Envoy's DaemonSet's pods (config/envoy: the agent's own
	// namespace, app.kubernetes.io/name=aether-envoy). An empty Namespace or a nil Pods: no pod.
	Namespace string
	Pods      labels.Selector
	// Host admits a process of the node in no pod's cgroup too (proxyless.ErrNoPod): an Envoy run
	// on the node itself. A TCP Listener carries no peer credentials: with Host every caller that
	// reaches its loopback port is served, without it none.
	Host bool
}

// String says which callers n admits, for a refusal.
func (n NodeEnvoy) String() string {
	var who []string
	if n.admitsPods() {
		who = append(who, fmt.Sprintf("the pods of namespace %s labelled %s", n.Namespace, n.Pods))
	}
	if n.Host {
		who = append(who, "the node's own processes (in no pod)")
	}
	if len(who) == 0 {
		return "no caller: the agent was told of none"
	}
	return strings.Join(who, ", and ")
}

func (n NodeEnvoy) admitsPods() bool { return n.Namespace != "" && n.Pods != nil }

// Why the node's socket refused a caller, the values of nodeRefused's label reason.
const (
	// refusedNotEnvoy: the caller runs in a pod of the node that is not the node Envoy's.
	refusedNotEnvoy = "not_envoy"
	// refusedUnknownPod: the caller runs in a pod the agent does not know (or could not read).
	refusedUnknownPod = "unknown_pod"
	// refusedNodeProcess: the caller is a process of the node in no pod, and NodeEnvoy.Host is off.
	refusedNodeProcess = "node_process"
	// refusedNoCaller: the kernel names no caller (a TCP listener, pid 0 outside the agent's PID
	// namespace, a process gone before it was held).
	refusedNoCaller = "no_caller"
)

// maxLoggedCallers bounds what the gate remembers of the callers it has logged: past it, it starts
// again (a caller is then logged once more).
const maxLoggedCallers = 1024

// envoyGate admits the node Envoy's streams on the node's socket, and refuses every other.
type envoyGate struct {
	s   *Server
	who NodeEnvoy
	// peers learn each connection's caller, unbounded (peerCredentials.bound).
	peers *peerCredentials
	// tcp is set for a TCP listener: no caller is known.
	tcp bool

	mu sync.Mutex
	// logged are the callers (reason and pod UID) whose refusal was logged.
	logged map[string]bool
}

func newEnvoyGate(s *Server, who NodeEnvoy, peers *peerCredentials) *envoyGate {
	tcp := s.listener != nil && s.listener.Addr().Network() != networkUnix
	return &envoyGate{s: s, who: who, peers: peers, tcp: tcp, logged: map[string]bool{}}
}

// serverOptions put the gate on a gRPC server: its credentials and its interceptors, for every
// method the server registers (stream and unary).
func (g *envoyGate) serverOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.Creds(g.peers),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
			if err := g.admit(ss.Context(), info.FullMethod); err != nil {
				return err
			}
			return handler(srv, ss)
		}),
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
			if err := g.admit(ctx, info.FullMethod); err != nil {
				return nil, err
			}
			return handler(ctx, req)
		}),
	}
}

// admit is nil for a stream of the node's Envoy, and otherwise its refusal: PermissionDenied
// naming the caller and why, counted and logged.
func (g *envoyGate) admit(ctx context.Context, method string) error {
	caller := callerOfStream(ctx)
	reason, why := g.check(ctx, caller)
	if reason == "" {
		return nil
	}
	nodeRefused.WithLabelValues(reason).Inc()
	log := g.s.log
	if !g.firstRefusal(reason + "/" + caller.PodUID) {
		log = log.V(1)
	}
	log.Info("Refusing a caller of the node's xDS socket: it is not the node's Envoy", "caller", caller.String(), "reason", reason,
		"why", why, "method", method)
	return status.Errorf(codes.PermissionDenied, "this socket serves the node's Envoy only (%s): %s", g.who, why)
}

// check is why caller is not the node's Envoy (reason, a nodeRefused label, and a sentence), or
// nothing when it is.
func (g *envoyGate) check(ctx context.Context, caller Caller) (reason, why string) {
	switch {
	case g.tcp && g.who.Host:
		return "", "" // told to serve whoever reaches the port
	case g.tcp:
		return refusedNoCaller, fmt.Sprintf("%s is a TCP port, whose connections carry no peer credentials: the caller cannot be known", g.s.Address())
	case errors.Is(caller.Err, proxyless.ErrNoPod) && g.who.Host:
		return "", ""
	case errors.Is(caller.Err, proxyless.ErrNoPod):
		return refusedNodeProcess, fmt.Sprintf("the caller, %s, is a process of the node, and the node's own processes are not served", caller)
	case caller.Err != nil:
		return refusedNoCaller, fmt.Sprintf("the caller cannot be known: %s", caller)
	case !g.who.admitsPods():
		return refusedNotEnvoy, fmt.Sprintf("the caller, %s, runs in a pod, and no pod is the node's Envoy", caller)
	}
	pod, ok, err := g.s.nodePod(ctx, caller.PodUID)
	switch {
	case err != nil:
		return refusedUnknownPod, fmt.Sprintf("the pod of the caller, %s, could not be read: %v", caller, err)
	case !ok:
		return refusedUnknownPod, fmt.Sprintf("the caller, %s, runs in no pod of this node the agent knows (a pod it has not seen yet: the client retries)", caller)
	case pod.Namespace != g.who.Namespace || !g.who.Pods.Matches(labels.Set(pod.Labels)):
		return refusedNotEnvoy, fmt.Sprintf("the caller, process %d, runs in pod %s (UID %s), which is not the node's Envoy", caller.PID, pod, caller.PodUID)
	}
	return "", ""
}

// firstRefusal reports whether the refusal of key is logged for the first time.
func (g *envoyGate) firstRefusal(key string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.logged[key] {
		return false
	}
	if len(g.logged) >= maxLoggedCallers {
		clear(g.logged)
	}
	g.logged[key] = true
	return true
}
