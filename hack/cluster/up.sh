#!/usr/bin/env bash
# Brings up a single-node Kubernetes cluster inside a network namespace (the "node"): etcd,
# kube-apiserver, kube-controller-manager, kube-scheduler, containerd and the kubelet, built from
# the Go module proxy (make cluster-binaries), all state under $AETHER_CLUSTER_DIR. Every daemon
# and every client runs inside the namespace: nothing is sent from the host's own namespace to
# the node's addresses. Use hack/cluster/kubectl.sh to talk to it.
#
# kube-proxy too. make cluster-up then deploys the operator (hack/cluster/deploy.sh).
# Needs: iproute2, util-linux (nsenter), iptables (kube-proxy), libseccomp-dev (runc's build).
set -euo pipefail
cd "$(dirname "$0")/../.."

STATE=${AETHER_CLUSTER_DIR:-/tmp/aether-cluster}
NETNS=${AETHER_NETNS:-aether-node}
NODE=node-a
NODE_IP=10.99.0.2
POD_CIDR=10.244.0.0/24
SERVICE_CIDR=10.96.0.0/24

log() { echo "cluster-up: $*" >&2; }
# nsenter enters only the network namespace: `ip netns exec` would also remount /sys and hide
# the cgroup mounts the kubelet needs.
in_node() { nsenter --net="/run/netns/$NETNS" "$@"; }

K8S_CMDS="kube-apiserver kubectl kubelet kube-controller-manager kube-scheduler kube-proxy"
export K8S_CMDS
K8S=$(dirname "$(readlink -f "$(hack/build-binaries.sh 2>/dev/null)/kubelet")")
ETCD=$(dirname "$(readlink -f "$(hack/build-binaries.sh 2>/dev/null)/etcd")")
RUNTIME=$(hack/cluster/build-runtime.sh 2>/dev/null)

if ip netns list | grep -qw "$NETNS"; then
  echo "cluster-up: network namespace $NETNS exists: run make cluster-down first" >&2
  exit 1
fi
mkdir -p "$STATE"/{pki,logs,etcd,containerd/root,containerd/state,cni/net.d,cni/bin,kubelet}
for f in "$RUNTIME"/{bridge,host-local,loopback,portmap}; do ln -sfn "$(readlink -f "$f")" "$STATE/cni/bin/"; done

log "network namespace $NETNS, node IP $NODE_IP"
ip netns add "$NETNS"
# iproute2 makes /run/netns a shared mount of itself; the pods' namespaces are pinned there too, and
# the agent's DaemonSet mounts it with HostToContainer propagation, which containerd refuses for a
# private mount.
if ! awk '$5 == "/run/netns" && / shared:/ { found = 1 } END { exit !found }' /proc/self/mountinfo; then
  echo "cluster-up: /run/netns is not a shared mount after ip netns add: the agent could not see the pods' network namespaces" >&2
  exit 1
fi
in_node ip link set lo up
# The node's own address, on a veth pair kept inside the namespace (the dummy link type is not
# available here); the default route lets the kubelet and the CNI bridge find it.
in_node ip link add eth0 type veth peer name eth0-peer
in_node ip addr add "$NODE_IP/24" dev eth0
in_node ip link set eth0 up
in_node ip link set eth0-peer up
in_node ip route add default via 10.99.0.1 dev eth0 onlink

log "PKI"
go run ./hack/cluster/pki -dir "$STATE/pki" -node-name "$NODE" -node-ip "$NODE_IP"
P=$STATE/pki

start() { # start NAME CMD... : run CMD in the node, logging to $STATE/logs/NAME.log
  local name=$1; shift
  in_node "$@" >"$STATE/logs/$name.log" 2>&1 &
  echo $! >"$STATE/logs/$name.pid"
}

start etcd "$ETCD/etcd" --data-dir "$STATE/etcd" --listen-client-urls http://127.0.0.1:2379 \
  --advertise-client-urls http://127.0.0.1:2379 --listen-peer-urls http://127.0.0.1:2380
start kube-apiserver "$K8S/kube-apiserver" --etcd-servers http://127.0.0.1:2379 \
  --advertise-address "$NODE_IP" --bind-address 0.0.0.0 --secure-port 6443 \
  --tls-cert-file "$P/apiserver.crt" --tls-private-key-file "$P/apiserver.key" --client-ca-file "$P/ca.crt" \
  --kubelet-client-certificate "$P/apiserver-kubelet-client.crt" --kubelet-client-key "$P/apiserver-kubelet-client.key" \
  --kubelet-certificate-authority "$P/ca.crt" --kubelet-preferred-address-types InternalIP \
  --service-account-issuer https://kubernetes.default.svc.cluster.local --service-account-key-file "$P/sa.pub" \
  --service-account-signing-key-file "$P/sa.key" --service-cluster-ip-range "$SERVICE_CIDR" \
  --authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction --allow-privileged
log "waiting for the API server"
for _ in $(seq 120); do
  in_node "$K8S/kubectl" --kubeconfig "$P/admin.kubeconfig" get --raw /readyz >/dev/null 2>&1 && break
  sleep 0.5
done
in_node "$K8S/kubectl" --kubeconfig "$P/admin.kubeconfig" get --raw /readyz >/dev/null

start kube-controller-manager "$K8S/kube-controller-manager" --kubeconfig "$P/kube-controller-manager.kubeconfig" \
  --authentication-kubeconfig "$P/kube-controller-manager.kubeconfig" --authorization-kubeconfig "$P/kube-controller-manager.kubeconfig" \
  --use-service-account-credentials --service-account-private-key-file "$P/sa.key" --root-ca-file "$P/ca.crt" \
  --cluster-signing-cert-file "$P/ca.crt" --cluster-signing-key-file "$P/ca.key" \
  --allocate-node-cidrs --cluster-cidr 10.244.0.0/16 --node-cidr-mask-size 24 --service-cluster-ip-range "$SERVICE_CIDR" \
  --leader-elect=false
start kube-scheduler "$K8S/kube-scheduler" --kubeconfig "$P/kube-scheduler.kubeconfig" \
  --authentication-kubeconfig "$P/kube-scheduler.kubeconfig" --authorization-kubeconfig "$P/kube-scheduler.kubeconfig" --leader-elect=false

cat >"$STATE/containerd/config.toml" <<TOML
version = 3
root = "$STATE/containerd/root"
state = "/run/containerd"
[grpc]
  address = "/run/containerd/containerd.sock"
[plugins."io.containerd.cri.v1.runtime"]
  enable_selinux = false
  # Pod network namespaces are pinned where a node's runtime pins them by default, /var/run/netns,
  # which the agent's DaemonSet mounts (HostToContainer, for capture and the node's Envoy):
  # ip netns add (above) made /run/netns a shared mount, so the pins reach the agent's container.
  # cluster-down removes the pins (cni-<uuid>) this cluster left there.
  restrict_oom_score_adj = true
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = ["$STATE/cni/bin"]
    conf_dir = "$STATE/cni/net.d"
  [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
      BinaryName = "$RUNTIME/runc"
      SystemdCgroup = false
[plugins."io.containerd.cri.v1.images"]
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = "registry.k8s.io/pause:aether"
TOML
# The node's primary CNI configuration: bridge, portmap, loopback, as a network plugin's DaemonSet
# would write it. The mesh's plugin (aether-cni) is NOT written here: the agent's DaemonSet installs
# it, as on any cluster (its init container chains it last into this file; hack/cluster/deploy.sh
# points the DaemonSet's CNI hostPaths at $STATE/cni).
cat >"$STATE/cni/net.d/10-aether.conflist" <<JSON
{"cniVersion": "1.0.0", "name": "aether", "plugins": [
  {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "$POD_CIDR"}]], "routes": [{"dst": "0.0.0.0/0"}]}},
  {"type": "portmap", "capabilities": {"portMappings": true}},
  {"type": "loopback"}
]}
JSON
start containerd env PATH="$RUNTIME:$PATH" "$RUNTIME/containerd" --config "$STATE/containerd/config.toml"
for _ in $(seq 60); do [[ -S /run/containerd/containerd.sock ]] && break; sleep 0.5; done
images="pause operator testserver spire-server spire-agent"
for img in $images; do [[ -f bin/images/$img.tar ]] || { make images >/dev/null; break; }; done
for img in $images; do
  in_node "$RUNTIME/ctr" --address /run/containerd/containerd.sock -n k8s.io images import "bin/images/$img.tar" >/dev/null
done

cat >"$STATE/kubelet/config.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: "$P/ca.crt"}
authorization: {mode: Webhook}
tlsCertFile: "$P/kubelet-serving.crt"
tlsPrivateKeyFile: "$P/kubelet-serving.key"
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
podCIDR: "$POD_CIDR"
clusterDomain: cluster.local
resolvConf: ""
staticPodPath: ""
YAML
start kubelet "$K8S/kubelet" --config "$STATE/kubelet/config.yaml" --kubeconfig "$P/kubelet.kubeconfig" \
  --node-ip "$NODE_IP" --hostname-override "$NODE" --root-dir /var/lib/kubelet
cat >"$STATE/kube-proxy.yaml" <<YAML
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: "$P/kube-proxy.kubeconfig"}
mode: iptables
clusterCIDR: 10.244.0.0/16
hostnameOverride: $NODE
conntrack: {maxPerCore: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
YAML
start kube-proxy "$K8S/kube-proxy" --config "$STATE/kube-proxy.yaml"
log "waiting for node $NODE to be Ready"
for _ in $(seq 120); do
  in_node "$K8S/kubectl" --kubeconfig "$P/admin.kubeconfig" wait --for=condition=Ready "node/$NODE" --timeout=1s >/dev/null 2>&1 && break
  sleep 1
done
in_node "$K8S/kubectl" --kubeconfig "$P/admin.kubeconfig" get nodes -o wide
echo "KUBECONFIG=$P/admin.kubeconfig (use hack/cluster/kubectl.sh: clients run inside netns $NETNS)"
