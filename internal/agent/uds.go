// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	configv1 "github.com/aether-mesh/aether-operator/api/config/v1"
	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/endpointpolicy"
	"github.com/aether-mesh/aether-operator/internal/portspec"
	"github.com/aether-mesh/aether-operator/internal/registration"
)

// UDSOptions configure delivery to the pods' Unix sockets (the csi.aether.io node plugin's
// per-pod directories).
type UDSOptions struct {
	// Enabled delivers to sockets (--uds-csi, the chart's udsCsi.enabled) and reads
	// EndpointPolicies. Off, a pod that declares a socket keeps TCP delivery, counted as disabled,
	// and no policy is read.
	Enabled bool
	// Root is where the plugin mounts each pod's socket directory on the node, <Root>/<pod UID>;
	// portspec.UDSHostRoot when empty.
	Root string
}

// udsResolveFailures counts the pods whose declared socket delivery the agent refused, by
// reason: once per pod and reason (the log line says which pod). Every reason is exported at
// zero.
var udsResolveFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "aether_agent_uds_resolve_failures_total",
	Help: "Pods whose declared Unix socket delivery (endpoint.aether.io/uds-socket or an EndpointPolicy) the node agent refused, once per pod and reason: not_csi, volume_not_declared, bad_file, path_too_long, multiple_csi_volumes, no_uid, bad_request, disabled. A refused pod keeps TCP delivery.",
}, []string{"reason"})

func init() {
	ctrlmetrics.Registry.MustRegister(udsResolveFailures)
	for _, reason := range registration.AllUDSReasons() {
		udsResolveFailures.WithLabelValues(string(reason))
	}
}

// The agent reads the policies (when UDS delivery is on) to learn the socket of the pods of a
// Service they target, and the Services to learn which pods a Service selects.
// +kubebuilder:rbac:groups=config.aether.io,resources=endpointpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch

// udsResolver decides, per pod, where its inbound is delivered (registration.ResolveUDS over the
// pod's annotation and the EndpointPolicies of the Services that select it), and tells each
// refusal once per pod and reason: a log line naming the pod and a count. The xDS publisher and
// the prober share one, so that the proxy and the probe agree on where the pod serves.
type udsResolver struct {
	reader client.Reader // the manager's cache
	opts   UDSOptions
	log    logr.Logger

	mu sync.Mutex
	// told are the reasons each pod was refused for, so each is said and counted once; and the
	// policy conflicts already logged.
	told      map[types.UID]map[registration.UDSReason]bool
	conflicts map[string]bool
}

// newUDSResolver reads through reader; a nil one is a resolver with delivery off.
func newUDSResolver(reader client.Reader, opts UDSOptions, log logr.Logger) *udsResolver {
	if opts.Root == "" {
		opts.Root = portspec.UDSHostRoot
	}
	return &udsResolver{reader: reader, opts: opts, log: log.WithName("uds"),
		told: map[types.UID]map[registration.UDSReason]bool{}, conflicts: map[string]bool{}}
}

// path is where pod's inbound is delivered: its socket's node path, or "" for TCP delivery (none
// declared, or a declaration refused: logged and counted). An error is a failed read of the
// cache.
func (r *udsResolver) path(ctx context.Context, pod *corev1.Pod) (string, error) {
	spec, err := portspec.Parse(pod.Annotations)
	return r.pathOf(ctx, pod, spec, err)
}

// pathOf is path with pod's annotations parsed already (spec, or the error that refused them).
func (r *udsResolver) pathOf(ctx context.Context, pod *corev1.Pod, spec portspec.Spec, err error) (string, error) {
	if err != nil {
		return "", nil // the pod is refused as a whole (no MeshEndpoint), elsewhere
	}
	in := registration.UDSInputs{Enabled: r.opts.Enabled, Root: r.opts.Root, Annotated: spec.UDSSocket}
	if spec.UDSSocket == nil && r.opts.Enabled {
		policy, err := r.policy(ctx, pod)
		if err != nil {
			return "", err
		}
		if policy != nil {
			in.Policy, in.PolicyName = policy.Spec.UDSSocket, policy.Name
		}
	}
	d, err := registration.ResolveUDS(pod, in)
	if refused, ok := errors.AsType[*registration.UDSError](err); ok {
		r.refuse(pod, refused)
		return "", nil
	}
	return d.Path, err
}

// policy is the EndpointPolicy that applies to pod: of the Services of its namespace that select
// it and have a policy, the first by name, and of that Service's policies the winner
// (endpointpolicy.Winner). A losing policy is logged once.
func (r *udsResolver) policy(ctx context.Context, pod *corev1.Pod) (*configv1.EndpointPolicy, error) {
	var policies configv1.EndpointPolicyList
	if err := r.reader.List(ctx, &policies, client.InNamespace(pod.Namespace)); err != nil {
		return nil, fmt.Errorf("listing the EndpointPolicies of namespace %s: %w", pod.Namespace, err)
	}
	if len(policies.Items) == 0 {
		return nil, nil
	}
	var services corev1.ServiceList
	if err := r.reader.List(ctx, &services, client.InNamespace(pod.Namespace)); err != nil {
		return nil, fmt.Errorf("listing the Services of namespace %s: %w", pod.Namespace, err)
	}
	slices.SortFunc(services.Items, func(a, b corev1.Service) int { return cmp.Compare(a.Name, b.Name) })
	for _, svc := range services.Items {
		if len(svc.Spec.Selector) == 0 || !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(pod.Labels)) {
			continue
		}
		win := endpointpolicy.Winner(policies.Items, pod.Namespace, svc.Name)
		if win == nil {
			continue
		}
		r.logConflicts(policies.Items, win)
		return win, nil
	}
	return nil, nil
}

// logConflicts logs, once each, the policies that target win's Service and lose to it.
func (r *udsResolver) logConflicts(policies []configv1.EndpointPolicy, win *configv1.EndpointPolicy) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range policies {
		p := &policies[i]
		key := p.Namespace + "/" + p.Name + ">" + win.Name
		if p.Name == win.Name || !endpointpolicy.Targets(p, win.Namespace, win.Spec.TargetRef.Name) || r.conflicts[key] {
			continue
		}
		r.conflicts[key] = true
		r.log.Info("EndpointPolicy ignored: another policy targets the same Service and wins (the smallest name applies)",
			"policy", client.ObjectKeyFromObject(p), "winner", win.Name, "service", win.Spec.TargetRef.Name)
	}
}

// refuse tells a refusal once per pod and reason: a log line naming the pod, and a count.
func (r *udsResolver) refuse(pod *corev1.Pod, refused *registration.UDSError) {
	r.mu.Lock()
	defer r.mu.Unlock()
	reasons := r.told[pod.UID]
	if reasons == nil {
		reasons = map[registration.UDSReason]bool{}
		r.told[pod.UID] = reasons
	}
	if reasons[refused.Reason] {
		return
	}
	reasons[refused.Reason] = true
	udsResolveFailures.WithLabelValues(string(refused.Reason)).Inc()
	r.log.Info("Pod's Unix socket delivery refused; it keeps TCP delivery", "pod", client.ObjectKeyFromObject(pod),
		"reason", string(refused.Reason), "message", refused.Message)
}

// forget drops what was told of the pods not in seen (gone from the node).
func (r *udsResolver) forget(seen map[types.UID]bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for uid := range r.told {
		if !seen[uid] {
			delete(r.told, uid)
		}
	}
}

// endpointPath is the socket the pod of ep serves on ("" for TCP delivery, or when the pod is not
// in the cache or is another pod of the same name), for the prober: it probes where the proxy
// delivers. A nil resolver delivers over TCP.
func (r *udsResolver) endpointPath(ctx context.Context, ep *meshv1alpha1.MeshEndpoint) string {
	if r == nil {
		return ""
	}
	pod := &corev1.Pod{}
	if err := r.reader.Get(ctx, client.ObjectKeyFromObject(ep), pod); err != nil || string(pod.UID) != ep.Spec.PodUID {
		return ""
	}
	path, err := r.path(ctx, pod)
	if err != nil {
		r.log.V(1).Info("Could not resolve a pod's socket delivery; probing it over TCP this round", "pod", client.ObjectKeyFromObject(pod), "error", err.Error())
	}
	return path
}
