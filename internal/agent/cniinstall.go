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
	// Kubeconfig is where the plugin's kubeconfig is kept (rewritten when the credentials
	// change); empty: none is written.
	Kubeconfig string
	// RestConfig holds the credentials the kubeconfig carries (the agent's own).
	RestConfig *rest.Config
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
		k.keep()
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
	}
}

// keep puts back what went missing, saying what it did; a failure is logged and tried again.
func (k *cniKeeper) keep() {
	if k.opts.Kubeconfig != "" {
		if wrote, err := cni.WriteKubeconfig(k.opts.Kubeconfig, k.opts.RestConfig); err != nil {
			k.log.Error(err, "Could not write the CNI plugin's kubeconfig; retrying", "path", k.opts.Kubeconfig)
		} else if wrote {
			k.log.Info("Wrote the CNI plugin's kubeconfig (the agent's current credentials)", "path", k.opts.Kubeconfig)
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

// Uninstalling reports whether the agent of pod (its own pod) stops because its DaemonSet is going
// away: deleted, being deleted, or replaced by another of the same name; or because its
// credentials are revoked (the ServiceAccount or its role deleted with the installation). Then
// the node's CNI plugin goes too. An agent that stops for any other reason (a restart, an
// upgrade, a node drain) leaves the plugin in place: it fails ADD for meshed pods until the next
// agent answers, so none starts uncaptured. When it cannot tell (the API server unreachable), it
// says so with an error, and the caller keeps the plugin: fail closed, as the plugin does.
func Uninstalling(ctx context.Context, c client.Reader, pod client.ObjectKey) (bool, string, error) {
	revoked := func(err error) bool { return apierrors.IsUnauthorized(err) || apierrors.IsForbidden(err) }
	self := &corev1.Pod{}
	if err := c.Get(ctx, pod, self); revoked(err) {
		return true, fmt.Sprintf("the agent may no longer read its own pod (%v): its credentials are revoked with the installation", err), nil
	} else if err != nil {
		return false, "", fmt.Errorf("reading the agent's pod %s: %w", pod, err)
	}
	owner := metav1.GetControllerOf(self)
	if owner == nil || owner.Kind != "DaemonSet" {
		return false, fmt.Sprintf("pod %s is not a DaemonSet's: nothing says the installation is going away", pod), nil
	}
	ds := &appsv1.DaemonSet{}
	err := c.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: owner.Name}, ds)
	switch {
	case apierrors.IsNotFound(err):
		return true, fmt.Sprintf("DaemonSet %s/%s is deleted", pod.Namespace, owner.Name), nil
	case revoked(err):
		return true, fmt.Sprintf("the agent may no longer read its DaemonSet (%v): its credentials are revoked with the installation", err), nil
	case err != nil:
		return false, "", fmt.Errorf("reading the agent's DaemonSet %s/%s: %w", pod.Namespace, owner.Name, err)
	case ds.UID != owner.UID:
		return true, fmt.Sprintf("DaemonSet %s/%s was deleted and created again (uid %s, the pod's owner was %s)", pod.Namespace, owner.Name, ds.UID, owner.UID), nil
	case ds.DeletionTimestamp != nil:
		return true, fmt.Sprintf("DaemonSet %s/%s is being deleted", pod.Namespace, owner.Name), nil
	}
	return false, fmt.Sprintf("DaemonSet %s/%s stays: the agent restarts or is upgraded", pod.Namespace, owner.Name), nil
}
