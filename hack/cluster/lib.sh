# Sourced (never run) by hack/cluster/up.sh and hack/cluster/restart.sh, from the repository's
# root: the node's constants, where its binaries are, and every component's command line, defined
# here once, so that a restarted component runs exactly the command line up.sh started it with.

STATE=${AETHER_CLUSTER_DIR:-/tmp/aether-cluster}
NETNS=${AETHER_NETNS:-aether-node}
NODE=node-a
NODE_IP=10.99.0.2
POD_CIDR=10.244.0.0/24
SERVICE_CIDR=10.96.0.0/24
P=$STATE/pki
# The components, in the order up.sh starts them.
COMPONENTS="etcd kube-apiserver kube-controller-manager kube-scheduler containerd kubelet kube-proxy"

# nsenter enters only the network namespace: `ip netns exec` would also remount /sys and hide
# the cgroup mounts the kubelet needs.
in_node() { nsenter --net="/run/netns/$NETNS" "$@"; }

# binaries sets K8S, ETCD and RUNTIME, the directories of the node's binaries, building them
# first if the cache lacks them (make cluster-binaries).
binaries() {
  K8S_CMDS="kube-apiserver kubectl kubelet kube-controller-manager kube-scheduler kube-proxy"
  export K8S_CMDS
  K8S=$(dirname "$(readlink -f "$(hack/build-binaries.sh 2>/dev/null)/kubelet")")
  ETCD=$(dirname "$(readlink -f "$(hack/build-binaries.sh 2>/dev/null)/etcd")")
  RUNTIME=$(hack/cluster/build-runtime.sh 2>/dev/null)
}

# command_line NAME sets CMD to the command line of component NAME (after binaries). The
# configuration files it names (the audit policy, containerd's, the kubelet's and kube-proxy's)
# are up.sh's to write.
command_line() {
  case $1 in
  etcd)
    CMD=("$ETCD/etcd" --data-dir "$STATE/etcd" --listen-client-urls http://127.0.0.1:2379
      --advertise-client-urls http://127.0.0.1:2379 --listen-peer-urls http://127.0.0.1:2380) ;;
  kube-apiserver)
    # The audit log (up.sh's policy): what the mesh's ServiceAccounts ask of the API server and
    # who writes the mesh's kinds; the fault specs count writes and relists in it.
    CMD=("$K8S/kube-apiserver" --etcd-servers http://127.0.0.1:2379
      --advertise-address "$NODE_IP" --bind-address 0.0.0.0 --secure-port 6443
      --tls-cert-file "$P/apiserver.crt" --tls-private-key-file "$P/apiserver.key" --client-ca-file "$P/ca.crt"
      --kubelet-client-certificate "$P/apiserver-kubelet-client.crt" --kubelet-client-key "$P/apiserver-kubelet-client.key"
      --kubelet-certificate-authority "$P/ca.crt" --kubelet-preferred-address-types InternalIP
      --service-account-issuer https://kubernetes.default.svc.cluster.local --service-account-key-file "$P/sa.pub"
      --service-account-signing-key-file "$P/sa.key" --service-cluster-ip-range "$SERVICE_CIDR"
      --authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction --allow-privileged
      --audit-policy-file "$STATE/audit-policy.yaml" --audit-log-path "$STATE/logs/audit.log" --audit-log-format json) ;;
  kube-controller-manager)
    CMD=("$K8S/kube-controller-manager" --kubeconfig "$P/kube-controller-manager.kubeconfig"
      --authentication-kubeconfig "$P/kube-controller-manager.kubeconfig" --authorization-kubeconfig "$P/kube-controller-manager.kubeconfig"
      --use-service-account-credentials --service-account-private-key-file "$P/sa.key" --root-ca-file "$P/ca.crt"
      --cluster-signing-cert-file "$P/ca.crt" --cluster-signing-key-file "$P/ca.key"
      --allocate-node-cidrs --cluster-cidr 10.244.0.0/16 --node-cidr-mask-size 24 --service-cluster-ip-range "$SERVICE_CIDR"
      --leader-elect=false) ;;
  kube-scheduler)
    CMD=("$K8S/kube-scheduler" --kubeconfig "$P/kube-scheduler.kubeconfig"
      --authentication-kubeconfig "$P/kube-scheduler.kubeconfig" --authorization-kubeconfig "$P/kube-scheduler.kubeconfig" --leader-elect=false) ;;
  containerd)
    CMD=(env PATH="$RUNTIME:$PATH" "$RUNTIME/containerd" --config "$STATE/containerd/config.toml") ;;
  kubelet)
    CMD=("$K8S/kubelet" --config "$STATE/kubelet/config.yaml" --kubeconfig "$P/kubelet.kubeconfig"
      --node-ip "$NODE_IP" --hostname-override "$NODE" --root-dir /var/lib/kubelet) ;;
  kube-proxy)
    CMD=("$K8S/kube-proxy" --config "$STATE/kube-proxy.yaml") ;;
  *)
    echo "hack/cluster: no component $1; the components are: $COMPONENTS" >&2
    return 1 ;;
  esac
}

# start NAME runs component NAME in the node, in the background, appending its output to
# $STATE/logs/NAME.log (a restart keeps what the previous run logged) and its pid to NAME.pid.
# nsenter is started as it is, not through in_node: a background shell function runs in a
# subshell, whose pid would be recorded; nsenter execs the component, so $! is the component's.
start() {
  local name=$1 CMD
  command_line "$name"
  nsenter --net="/run/netns/$NETNS" "${CMD[@]}" >>"$STATE/logs/$name.log" 2>&1 &
  echo $! >"$STATE/logs/$name.pid"
}

# kubectl_node runs the cluster's kubectl, as its admin, inside the node.
kubectl_node() { in_node "$K8S/kubectl" --kubeconfig "$P/admin.kubeconfig" "$@"; }

# wait_apiserver waits (up to 60 s) until the API server answers /readyz.
wait_apiserver() {
  for _ in $(seq 120); do
    kubectl_node get --raw /readyz >/dev/null 2>&1 && return 0
    sleep 0.5
  done
  kubectl_node get --raw /readyz >/dev/null
}
