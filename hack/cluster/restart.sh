#!/usr/bin/env bash
# Restarts one component of the cluster of hack/cluster/up.sh, with the command line up.sh
# started it with (hack/cluster/lib.sh): stops the running process (SIGTERM, its graceful stop;
# with --kill SIGKILL; SIGKILL anyway after 60 s), starts it again, and returns once it serves
# again: kube-apiserver when its /readyz answers, etcd when the API server's /readyz/etcd does,
# the kubelet when its node is Ready, containerd when ctr reaches it, the others when their
# secure (or, kube-proxy, health) port accepts connections.
#
#   hack/cluster/restart.sh [--kill] COMPONENT     (COMPONENT: one of lib.sh's COMPONENTS)
#
# Prints, on its last line, the milliseconds from the stop to serving again. Run it as up.sh
# runs: as root, on the host (it enters the node's network namespace itself).
set -euo pipefail
cd "$(dirname "$0")/../.."
source hack/cluster/lib.sh
log() { echo "cluster-restart: $*" >&2; }

signal=TERM
if [[ ${1:-} == --kill ]]; then signal=KILL; shift; fi
name=${1:?usage: hack/cluster/restart.sh [--kill] COMPONENT (one of: $COMPONENTS)}
binaries
command_line "$name" # an unknown component fails here, before anything is stopped

pidfile=$STATE/logs/$name.pid
pid=$(cat "$pidfile" 2>/dev/null) || { echo "cluster-restart: no $pidfile: is the cluster up (make cluster-up)?" >&2; exit 1; }
# The recorded process must still be this component's (a pid can be reused once it exits).
binary=${CMD[0]}
[[ $name == containerd ]] && binary=$RUNTIME/containerd
if ! tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$binary"; then
  echo "cluster-restart: process $pid of $pidfile is not $name ($binary) any more: restart the cluster (make cluster-down cluster-up)" >&2
  exit 1
fi

stopped=$(date +%s%N)
log "stopping $name (pid $pid, SIG$signal)"
kill -s "$signal" "$pid"
for _ in $(seq 600); do [[ -e /proc/$pid ]] || break; sleep 0.1; done
if [[ -e /proc/$pid ]]; then
  log "$name (pid $pid) still runs 60 s after SIG$signal: SIGKILL"
  kill -s KILL "$pid"
  while [[ -e /proc/$pid ]]; do sleep 0.1; done
fi

# alive fails the restart if the new process exited; wait_port PORT waits, while it is alive,
# until PORT accepts connections on the node's loopback.
alive() { [[ -e /proc/$(cat "$pidfile") ]] || { echo "cluster-restart: $name exited at start: see $STATE/logs/$name.log" >&2; exit 1; }; }
wait_port() { until in_node bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null; do alive; sleep 0.2; done; }

start "$name"
log "started $name again (pid $(cat "$pidfile"))"
case $name in
kube-apiserver) wait_apiserver ;;
etcd)
  for _ in $(seq 120); do kubectl_node get --raw /readyz/etcd >/dev/null 2>&1 && break; sleep 0.5; done
  kubectl_node get --raw /readyz/etcd >/dev/null ;;
kubelet)
  kubectl_node wait --for=condition=Ready "node/$NODE" --timeout=60s >/dev/null ;;
containerd)
  until in_node "$RUNTIME/ctr" --address /run/containerd/containerd.sock version >/dev/null 2>&1; do alive; sleep 0.2; done ;;
kube-controller-manager) wait_port 10257 ;;
kube-scheduler) wait_port 10259 ;;
kube-proxy) wait_port 10256 ;;
esac
echo $(( ($(date +%s%N) - stopped) / 1000000 ))
