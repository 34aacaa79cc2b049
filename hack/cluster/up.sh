#!/usr/bin/env bash
# Brings up a single-node Kubernetes cluster inside a network namespace (the "node"): etcd,
# kube-apiserver, kube-controller-manager, kube-scheduler, containerd and the kubelet, built from
# the Go module proxy (make cluster-binaries), all state under $AETHER_CLUSTER_DIR. Every daemon
# and every client runs inside the namespace: nothing is sent from the host's own namespace to
# the node's addresses. Use hack/cluster/kubectl.sh to talk to it.
#
# kube-proxy too. make cluster-up then deploys the operator (hack/cluster/deploy.sh). Each
# component's command line is hack/cluster/lib.sh's, which hack/cluster/restart.sh runs again to
# restart one (the fault specs restart the API server). The API server keeps an audit log of the
# mesh's requests ($STATE/logs/audit.log, the policy below).
# Needs: iproute2, util-linux (nsenter), iptables (kube-proxy), libseccomp-dev (runc's build).
set -euo pipefail
cd "$(dirname "$0")/../.."

source hack/cluster/lib.sh
log() { echo "cluster-up: $*" >&2; }
binaries

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
# The kubelet's directory and the pods' socket directories (config/csi) as shared mounts, as on a
# node whose init is systemd (its / is shared; this host's is private): the CSI plugin mounts into
# both with Bidirectional propagation, and the agent and Envoy mount the second HostToContainer,
# which containerd refuses for a private mount. Each a bind of itself, made shared;
# cluster-down unmounts them with the rest.
for dir in /var/lib/kubelet /run/aether/uds; do
  mkdir -p "$dir"
  mount --bind "$dir" "$dir"
  mount --make-rshared "$dir"
done
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

# The API server's audit log (--audit-policy-file, hack/cluster/lib.sh), at Metadata level (who,
# what, when; no bodies): every request but a get of the mesh's ServiceAccounts (the agent's and
# the manager's writes, lists and watches: a relist is a list or a watch with
# sendInitialEvents=true), and every write of the mesh's kinds and of routes, whoever makes it
# (the garbage collector's deletes too). Nothing else: the log stays small.
cat >"$STATE/audit-policy.yaml" <<YAML
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  userGroups: ["system:serviceaccounts:aether-operator-system"]
  verbs: [create, update, patch, delete, deletecollection, list, watch]
- level: Metadata
  verbs: [create, update, patch, delete, deletecollection]
  resources:
  - group: mesh.aether.io
  - group: gateway.networking.k8s.io
- level: None
YAML

start etcd
start kube-apiserver
log "waiting for the API server"
wait_apiserver

start kube-controller-manager
start kube-scheduler

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
start containerd
for _ in $(seq 60); do [[ -S /run/containerd/containerd.sock ]] && break; sleep 0.5; done
images="pause operator testserver spire-server spire-agent envoy"
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
# How often the kubelet syncs each pod, which is also when it refreshes a Secret volume: the
# manager writes its own webhook certificate into the Secret its pods mount (--cert-rotation) and is
# ready once the files appear, which at the default (1 min, plus the kubelet's cache) took 100 s
# of every deploy. 10 s brings that down to a few seconds.
syncFrequency: 10s
# The node's disk is the machine's, shared with builds and other work: evict only when it is
# really full, not at the defaults' 10 % (nodefs) and 15 % (imagefs) of a large shared disk,
# which a build cache alone can cross and which taints the node disk-pressure mid-run.
evictionHard:
  memory.available: "100Mi"
  nodefs.available: "2Gi"
  imagefs.available: "2Gi"
  nodefs.inodesFree: "5%"
YAML
start kubelet
cat >"$STATE/kube-proxy.yaml" <<YAML
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: "$P/kube-proxy.kubeconfig"}
mode: iptables
clusterCIDR: 10.244.0.0/16
hostnameOverride: $NODE
conntrack: {maxPerCore: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
YAML
start kube-proxy
log "waiting for node $NODE to be Ready"
for _ in $(seq 120); do
  kubectl_node wait --for=condition=Ready "node/$NODE" --timeout=1s >/dev/null 2>&1 && break
  sleep 1
done
kubectl_node get nodes -o wide
echo "KUBECONFIG=$P/admin.kubeconfig (use hack/cluster/kubectl.sh: clients run inside netns $NETNS)"
