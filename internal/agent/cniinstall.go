// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aether-mesh/aether-operator/internal/cni"
)

// The agent reads its own DaemonSet when it stops, to tell an uninstall from a restart (see
// Uninstalling).
// +kubebuilder:rbac:groups=apps,resources=daemonsets,verbs=get

// CNIInstallOptions keep the CNI plugin installed while the agent runs: the DaemonSet's init
// container installs it (cmd/agent install-cni) and the agent keeps it so, for a primary CNI that
// rewrites its conflist when it restarts drops the plugins it did not write, and a bound token
// in the plugin's kubeconfig expires.
type CNIInstallOptions struct {
	// Installer puts the binary and the conflist entry back when they go missing.
	Installer cni.Installer
	// Kubeconfig is where the plugin's kubeconfig is kept (rewritten when its token is renewed);
	// empty: none is written.
	Kubeconfig string
	// RestConfig says where the API server is and which CA it has; its credentials (the agent's)
	// are never written.
	RestConfig *rest.Config
	// PluginToken is the token the kubeconfig carries: the plugin's own ServiceAccount's, which
	// may only get pods. Required with Kubeconfig.
	PluginToken *ServiceAccountToken
	// ReaderToken, when set, is kept fresh too: a token of the agent's reader (ReaderAccount),
	// bound to no pod, which Uninstalling reads with when the agent's pod-bound token is refused.
	ReaderToken *ServiceAccountToken
	// Interval is how often both are checked (DefaultCNIKeepInterval if zero).
	Interval time.Duration
}

// DefaultCNIKeepInterval is CNIInstallOptions.Interval's default: a check reads one small file
// and stats another, and a conflist rewritten by another writer is back in at most this long.
const DefaultCNIKeepInterval = 10 * time.Second

// cniKeeper is the loop of CNIInstallOptions.
type cniKeeper struct {
	opts CNIInstallOptions
	log  logr.Logger
}

// NeedLeaderElection is false: every node's agent keeps its own node's plugin.
func (k *cniKeeper) NeedLeaderElection() bool { return false }

// Start checks at once, then every Interval until ctx ends.
func (k *cniKeeper) Start(ctx context.Context) error {
	ticker := time.NewTicker(cmp.Or(k.opts.Interval, DefaultCNIKeepInterval))
	defer ticker.Stop()
	for {
		k.keep(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
	}
}

// keep puts back what went missing, saying what it did; a failure is logged and tried again.
func (k *cniKeeper) keep(ctx context.Context) {
	if k.opts.Kubeconfig != "" {
		if wrote, err := WritePluginKubeconfig(ctx, k.opts.Kubeconfig, k.opts.RestConfig, k.opts.PluginToken); err != nil {
			k.log.Error(err, "Could not write the CNI plugin's kubeconfig; retrying", "path", k.opts.Kubeconfig)
		} else if wrote {
			k.log.Info("Wrote the CNI plugin's kubeconfig (its own ServiceAccount's token, renewed)", "path", k.opts.Kubeconfig,
				"serviceAccount", k.opts.PluginToken.Namespace+"/"+k.opts.PluginToken.Name)
		}
	}
	if k.opts.ReaderToken != nil {
		if _, err := k.opts.ReaderToken.Token(ctx); err != nil {
			k.log.Error(err, "Could not renew the agent's spare token (read with when its pod's token is refused as it stops); retrying")
		}
	}
	conflist, changed, err := k.opts.Installer.Ensure()
	switch {
	case err != nil:
		k.log.Error(err, "Could not check the CNI plugin's installation; retrying", "confDir", k.opts.Installer.ConfDir)
	case changed:
		k.log.Info("Put the CNI plugin back: another writer had removed it or changed its entry", "conflist", conflist,
			"binDir", k.opts.Installer.BinDir)
	}
}

// WritePluginKubeconfig writes the plugin's kubeconfig at path: cfg's API server, token's current
// token (renewed when due). It reports whether it wrote.
func WritePluginKubeconfig(ctx context.Context, path string, cfg *rest.Config, token *ServiceAccountToken) (bool, error) {
	if token == nil {
		return false, fmt.Errorf("the plugin's kubeconfig %s needs the plugin's ServiceAccount token source", path)
	}
	t, err := token.Token(ctx)
	if err != nil {
		return false, err
	}
	return cni.WriteKubeconfig(path, cfg, t)
}

// Self is what the agent learnt of its own pod when it started: the pod, and its controller, by
// which it finds its DaemonSet even once its pod is gone (force-deleted) as it stops.
type Self struct {
	Pod client.ObjectKey
	// Owner is the pod's controller; nil: read from the pod when the agent stops.
	Owner *metav1.OwnerReference
}

// Uninstalling reports whether the agent stops because its DaemonSet is going away: deleted, or
// being deleted, with none of the same name back within replaceWindow; or because its
// credentials are revoked with the installation (its role unbound: 403; its ServiceAccount
// deleted). Then the node's CNI plugin goes too. A DaemonSet replaced by another of the same
// name (kubectl replace --force, a GitOps tool's Replace: deleted and created again) is no
// uninstall: the new one's agent takes the node's pods over, captured all along. An agent that stops for any other reason (a restart, an upgrade, a
// node drain, its pod force-deleted) leaves the plugin in place: it fails ADD for meshed pods
// until the next agent answers, so none starts uncaptured. When it cannot tell (the API server
// unreachable), it says so with an error, and the caller keeps the plugin: fail closed, as the
// plugin does.
//
// c reads with the agent's pod-bound token. The API server refuses that token (401) once the pod
// is deleted, force-deleted or not, which says "this token died", not "uninstall": then spare,
// a live token of the agent's reader (ReaderAccount) bound to no pod, reads again. Only when the
// API server refuses that one too is the reader's ServiceAccount gone, deleted with the
// installation. Without spare, a 401 keeps the plugin.
func Uninstalling(ctx context.Context, self Self, c, spare client.Reader) (bool, string, error) {
	removed, why, err := uninstalling(ctx, self, c)
	if !apierrors.IsUnauthorized(err) {
		return removed, why, err
	}
	refused := err
	if spare == nil {
		return false, fmt.Sprintf("the API server refuses the agent's pod token (%v): the token died with the pod, which says nothing of the DaemonSet, and no other credential is at hand", refused), nil
	}
	removed, why, err = uninstalling(ctx, self, spare)
	switch {
	case apierrors.IsUnauthorized(err):
		return true, fmt.Sprintf("the API server refuses both the agent's pod token (%v) and a live token of its reader's ServiceAccount, bound to no pod (%v): the ServiceAccount is deleted with the installation", refused, err), nil
	case err != nil:
		return false, "", err
	}
	return removed, "the agent's pod token is refused; read with its reader's token, bound to no pod: " + why, nil
}

// uninstalling is Uninstalling with one credential; a 401 is returned as an error.
func uninstalling(ctx context.Context, self Self, c client.Reader) (bool, string, error) {
	revoked := func(err error) (bool, string, error) {
		return true, fmt.Sprintf("the agent may no longer read its own pod or DaemonSet (%v): its credentials are revoked with the installation", err), nil
	}
	owner := self.Owner
	pod := &corev1.Pod{}
	switch err := c.Get(ctx, self.Pod, pod); {
	case apierrors.IsUnauthorized(err):
		return false, "", fmt.Errorf("reading the agent's pod %s: %w", self.Pod, err)
	case apierrors.IsForbidden(err):
		return revoked(err)
	case apierrors.IsNotFound(err) && owner != nil:
		// The pod is gone (force-deleted): its DaemonSet, known from the start, tells.
	case err != nil:
		return false, "", fmt.Errorf("reading the agent's pod %s: %w", self.Pod, err)
	default:
		owner = metav1.GetControllerOf(pod)
	}
	if owner == nil || owner.Kind != "DaemonSet" {
		return false, fmt.Sprintf("pod %s is not a DaemonSet's: nothing says the installation is going away", self.Pod), nil
	}
	key := client.ObjectKey{Namespace: self.Pod.Namespace, Name: owner.Name}
	name := key.String()
	var going string // why the DaemonSet looks gone, while waiting for a replacement
	deadline := time.Now().Add(replaceWindow)
	for {
		ds := &appsv1.DaemonSet{}
		err := c.Get(ctx, key, ds)
		switch {
		case apierrors.IsNotFound(err):
			going = "is deleted"
		case apierrors.IsUnauthorized(err):
			return false, "", fmt.Errorf("reading the agent's DaemonSet %s: %w", name, err)
		case apierrors.IsForbidden(err):
			return revoked(err)
		case err != nil:
			return false, "", fmt.Errorf("reading the agent's DaemonSet %s: %w", name, err)
		case ds.DeletionTimestamp != nil:
			going = "is being deleted"
		case ds.UID != owner.UID:
			return false, fmt.Sprintf("DaemonSet %s was replaced (deleted and created again: uid %s, the pod's owner was %s): the new one's agent takes the node's pods over",
				name, ds.UID, owner.UID), nil
		default:
			return false, fmt.Sprintf("DaemonSet %s stays: the agent restarts or is upgraded", name), nil
		}
		if !time.Now().Before(deadline) {
			return true, fmt.Sprintf("DaemonSet %s %s, and none of its name came back within %s", name, going, replaceWindow), nil
		}
		select {
		case <-ctx.Done():
			return false, "", fmt.Errorf("DaemonSet %s %s; waiting for one of its name to come back (a replacement, not an uninstall): %w", name, going, ctx.Err())
		case <-time.After(replacePoll):
		}
	}
}

// replaceWindow is how long a stopping agent whose DaemonSet is deleted, or being deleted, waits
// for one of the same name to be created (a replacement: kubectl replace --force deletes the old
// object, waits for it to go, and creates the new at once) before it takes the deletion for an
// uninstall; replacePoll is how often it looks. Variables for the tests. A replacement that
// deletes in the foreground (the DaemonSet waits for its pods, this one among them) cannot be
// told from a deletion within the window, and uninstalls.
var replaceWindow, replacePoll = 10 * time.Second, 250 * time.Millisecond
