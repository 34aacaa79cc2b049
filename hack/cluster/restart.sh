#!/usr/bin/env bash
# Restarts one component of the cluster of hack/cluster/up.sh, with the command line up.sh
# started it with (hack/cluster/lib.sh): stops the running process (SIGTERM, its graceful stop;
# with --kill SIGKILL; SIGKILL anyway after 90 s), starts it again, and returns once it serves
# again: kube-apiserver when its /readyz answers, etcd when the API server's /readyz/etcd does,
# the kubelet when its node is Ready, containerd when ctr reaches it, the others when their
# secure (or, kube-proxy, health) port accepts connections.
#
#   hack/cluster/restart.sh [--kill] [--stop|--start] COMPONENT   (one of lib.sh's COMPONENTS)
#
# --stop only stops it (returning once its process is gone), --start only starts a stopped one:
# something can be done in between (the fault specs compact etcd while the API server is down).
# Prints, on its last line, the milliseconds from the stop to serving again (--stop: to the
# process gone; --start: from the start). Run it as up.sh runs: as root, on the host (it enters
# the node's network namespace itself).
set -euo pipefail
cd "$(dirname "$0")/../.."
source hack/cluster/lib.sh
log() { echo "cluster-restart: $*" >&2; }

signal=TERM action=restart
while [[ ${1:-} == --* ]]; do
  case $1 in
  --kill) signal=KILL ;;
  --stop) action=stop ;;
  --start) action=start ;;
  *) echo "cluster-restart: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
name=${1:?usage: hack/cluster/restart.sh [--kill] [--stop|--start] COMPONENT (one of: $COMPONENTS)}
binaries
command_line "$name" # an unknown component fails here, before anything is stopped

pidfile=$STATE/logs/$name.pid
pid=$(cat "$pidfile" 2>/dev/null) || { echo "cluster-restart: no $pidfile: is the cluster up (make cluster-up)?" >&2; exit 1; }
# running: the recorded process is alive and still this component's (a pid is reused once free).
binary=${CMD[0]}
[[ $name == containerd ]] && binary=$RUNTIME/containerd
running() { tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$binary"; }

since=$(date +%s%N)
if [[ $action != start ]]; then
  running || { echo "cluster-restart: $name (pid $pid of $pidfile) is not running: restart the cluster (make cluster-down cluster-up)" >&2; exit 1; }
  log "stopping $name (pid $pid, SIG$signal)"
  kill -s "$signal" "$pid"
  for _ in $(seq 900); do running || break; sleep 0.1; done
  if running; then
    log "$name (pid $pid) still runs 90 s after SIG$signal: SIGKILL"
    kill -s KILL "$pid"
    while running; do sleep 0.1; done
  fi
  log "$name stopped"
  if [[ $action == stop ]]; then
    echo $(( ($(date +%s%N) - since) / 1000000 ))
    exit 0
  fi
elif running; then
  echo "cluster-restart: $name runs (pid $pid): --start starts a stopped component" >&2
  exit 1
fi

# alive fails the restart if the new process exited; wait_port PORT waits, while it is alive,
# until PORT accepts connections on the node's loopback.
alive() { [[ -e /proc/$(cat "$pidfile") ]] || { echo "cluster-restart: $name exited at start: see $STATE/logs/$name.log" >&2; exit 1; }; }
wait_port() { until in_node bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null; do alive; sleep 0.2; done; }

start "$name"
log "started $name (pid $(cat "$pidfile"))"
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
log "$name serves"
echo $(( ($(date +%s%N) - since) / 1000000 ))
