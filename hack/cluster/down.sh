#!/usr/bin/env bash
# Tears down what hack/cluster/up.sh started: every process in the node's network namespace and
# every pod's process (the kubepods cgroup),
# the mounts the kubelet and containerd made (the pods' network namespaces pinned under
# /run/netns too), the namespace, the state directory and the fixed paths they write. Safe to
# run twice; fails if anything is left behind.
set -uo pipefail
STATE=${AETHER_CLUSTER_DIR:-/tmp/aether-cluster}
NETNS=${AETHER_NETNS:-aether-node}

if ip netns list | grep -qw "$NETNS"; then
  for _ in 1 2 3; do
    pids=$(ip netns pids "$NETNS" 2>/dev/null)
    [[ -z $pids ]] && break
    kill $pids 2>/dev/null; sleep 2
    kill -9 $(ip netns pids "$NETNS" 2>/dev/null) 2>/dev/null
  done
fi
# containerd shims re-parent to init but stay in the namespace: the loop above got them.
# /run/aether/uds: the CSI plugin's per-pod tmpfs mounts (config/csi), and the shared bind of the
# directory itself that up.sh made.
# The pods' processes: each pod has a network namespace of its own, so they are not among the
# node namespace's, and a container outlives its killed shim. The kubelet (cgroupDriver cgroupfs)
# puts every one under the kubepods cgroup.
kubepods() { find /sys/fs/cgroup/pids/kubepods /sys/fs/cgroup/kubepods -name cgroup.procs -exec cat {} + 2>/dev/null; }
for _ in 1 2 3; do
  pids=$(kubepods)
  [[ -z $pids ]] && break
  kill -9 $pids 2>/dev/null; sleep 1
done
for path in /var/lib/kubelet /run/containerd /run/aether/uds "$STATE"; do
  grep -o " $path[^ ]*" /proc/mounts | sort -r | while read -r m; do umount -l "$m" 2>/dev/null; done
done
ip netns delete "$NETNS" 2>/dev/null
# The pods' network namespaces containerd pinned under /run/netns (cni-<uuid>, its naming; the
# sandboxes were not torn down one by one), the agent's CNI directory on the host (its socket,
# the plugin's kubeconfig, the netns registry), which its DaemonSet created, and SPIRE's agent's
# socket directories (config/spire's hostPaths).
pins() { ls -d /run/netns/cni-* 2>/dev/null | grep -E '^/run/netns/cni-[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}$'; }
for pin in $(pins); do umount -l "$pin" 2>/dev/null; rm -f "$pin"; done
rm -rf "$STATE" /run/containerd /var/lib/kubelet /var/lib/cni /var/log/pods /var/log/containers /run/aether /run/spire

left=0
ip netns list | grep -qw "$NETNS" && { echo "cluster-down: netns $NETNS is still there" >&2; left=1; }
grep -qE " (/var/lib/kubelet|/run/containerd|/run/aether/uds|$STATE)" /proc/mounts && { echo "cluster-down: mounts left" >&2; left=1; }
[[ -n $(pins) ]] && { echo "cluster-down: pods' network namespaces are still pinned: $(pins | head -3)" >&2; left=1; }
for path in "$STATE" /run/containerd /var/lib/kubelet /var/lib/cni /run/aether /run/spire; do
  [[ -e $path ]] && { echo "cluster-down: $path is still there" >&2; left=1; }
done
[[ -n $(kubepods) ]] && { echo "cluster-down: pods' processes are still running: $(kubepods | head -3 | xargs)" >&2; left=1; }
if pgrep -f -- "$STATE" >/dev/null || pgrep -f -- "--net=/run/netns/$NETNS" >/dev/null; then
  echo "cluster-down: processes of the cluster are still running: $(pgrep -fa -- "$STATE" | head -3)" >&2
  left=1
fi
exit $left
