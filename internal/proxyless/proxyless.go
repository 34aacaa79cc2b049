// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package proxyless

import (
	"encoding/json"
	"fmt"
	"path"
	"strings"
)

// The node metadata a proxyless client announces on its xDS stream (the bootstrap's node.metadata).
const (
	// MetadataProxyless, "true", says the client is a proxyless gRPC client: the agent serves it
	// the proxyless rendering for its pod's identity, never the node's Envoy configuration.
	MetadataProxyless = "AETHER_PROXYLESS"
	// MetadataSNI, "true", says the client sends the SNI its clusters name: the pod runs with
	// EnvSNI=true (gRFC A101). Without it the client sends no SNI, and a connection lands on the
	// destination's floor chain (that pod's own primary port), so only primary ports are served
	// to it, each by the pods whose own primary it is.
	MetadataSNI = "AETHER_XDS_SNI"
	// MetadataTrue is the value of both.
	MetadataTrue = "true"
)

// The environment of a proxyless pod's containers.
const (
	// EnvBootstrap holds the gRPC xDS bootstrap (JSON); grpc-go reads it once, at start.
	EnvBootstrap = "GRPC_XDS_BOOTSTRAP_CONFIG"
	// EnvSNI turns on grpc-go's sending of the SNI a cluster's UpstreamTlsContext names (gRFC
	// A101, experimental, off by default): the mesh selects a destination port by it.
	EnvSNI = "GRPC_EXPERIMENTAL_XDS_SNI"
	// EnvPodName and EnvPodNamespace hold the pod's name and namespace (the downward API); the
	// injected bootstrap's node ID refers to them ($(VAR), expanded by the kubelet), since a pod
	// created from a generateName has no name yet when it is admitted.
	EnvPodName      = "AETHER_POD_NAME"
	EnvPodNamespace = "AETHER_POD_NAMESPACE"
)

// Where things are, inside a proxyless pod and on its node.
const (
	// SocketDir is the directory, inside the pod, holding the agent's proxyless xDS socket
	// (read-only, a hostPath of NodeSocketDir).
	SocketDir = "/var/run/aether"
	// ServerURI is the agent's proxyless xDS server as grpc-go dials it from inside the pod.
	ServerURI = "unix://" + SocketDir + "/" + SocketName
	// SocketName is the socket's file name, in SocketDir (pod) and NodeSocketDir (node).
	SocketName = "xds.sock"
	// NodeSocketDir is the directory, on the node, where the agent serves proxyless clients. It is
	// not the node's Envoy's socket (which will carry every pod's certificates by SDS): a pod
	// reaches this one only, and it serves proxyless node IDs only.
	NodeSocketDir = "/var/run/aether-proxyless"
	// DefaultNodeAddress is the agent's default proxyless xDS address (its --proxyless-xds-address).
	DefaultNodeAddress = "unix://" + NodeSocketDir + "/" + SocketName
	// IdentityDir is where the pod's certificate files are: its SVID, key and the mesh's trust
	// bundle, in PEM (CertificateFile, KeyFile, BundleFile). With SPIRE, the pod webhook's
	// native sidecar aether-identity keeps them there from the pod's SVID (an emptyDir); in a
	// mesh without SPIRE, whoever deploys the pod mounts them there.
	IdentityDir = "/var/run/secrets/aether/identity"
)

// The pod's certificate files, in IdentityDir.
var (
	CertificateFile = path.Join(IdentityDir, "svid.pem")
	KeyFile         = path.Join(IdentityDir, "svid_key.pem")
	BundleFile      = path.Join(IdentityDir, "bundle.pem")
)

// CertificateProvider is the certificate provider instance every proxyless cluster's TLS context
// names, for the client's certificate and for the trust bundle: the bootstrap defines it
// (certificate_providers, plugin file_watcher).
const CertificateProvider = "aether-identity"

// ServerListenerTemplate is the bootstrap's server_listener_resource_name_template: an xDS-enabled
// gRPC server (grpc-go's xds.NewGRPCServer) asks for the Listener it names, %s replaced by the
// address it listens on, "<IP>:<port>" ("0.0.0.0:9090", "[::]:9090", "10.244.1.7:9090"). grpc-go
// refuses to create such a server without one.
const ServerListenerTemplate = "grpc/server?xds.resource.listening_address=%s"

// ServerListener is the Listener an xDS-enabled gRPC server listening on hostPort asks for.
func ServerListener(hostPort string) string {
	return strings.Replace(ServerListenerTemplate, "%s", hostPort, 1)
}

// fileWatcher is grpc-go's certificate provider plugin that reads PEM files.
const fileWatcher = "file_watcher"

// refreshInterval is how often file_watcher reads the files again: a rotated SVID is picked up
// within a minute (SPIRE rotates at half of the SVID's life, an hour by default).
const refreshInterval = "60s"

// MaxNodeIDLength is the longest NodeID: a namespace is a DNS label (63 bytes), a pod name a DNS
// subdomain (253). The agent refuses a longer ID before it holds or logs it whole.
const MaxNodeIDLength = 63 + len("/") + 253

// NodeID is the xDS node ID of a proxyless client in pod namespace/name. A node name has no "/",
// so no proxyless ID is the node's Envoy's.
func NodeID(namespace, name string) string { return namespace + "/" + name }

// ParseNodeID reads a NodeID: the pod's namespace and name, or ok false when id is not of that
// shape or longer than MaxNodeIDLength.
func ParseNodeID(id string) (namespace, name string, ok bool) {
	if len(id) > MaxNodeIDLength {
		return "", "", false
	}
	namespace, name, ok = strings.Cut(id, "/")
	if !ok || namespace == "" || name == "" || strings.Contains(name, "/") {
		return "", "", false
	}
	return namespace, name, true
}

// Bootstrap is a proxyless client's gRPC xDS bootstrap.
type Bootstrap struct {
	// NodeID is the client's node ID (NodeID, or the webhook's $(VAR) spelling of it).
	NodeID string
	// ServerURI is the agent's proxyless xDS server (ServerURI in a pod).
	ServerURI string
	// CertificateFile, KeyFile and BundleFile are the file_watcher's files.
	CertificateFile, KeyFile, BundleFile string
	// SNI announces MetadataSNI: the client runs with EnvSNI=true.
	SNI bool
}

// Default is the bootstrap of a pod's client: the pod's node ID (in the webhook's $(VAR)
// spelling), the agent's socket and the identity files where the pod has them, SNI on.
func Default() Bootstrap {
	return Bootstrap{
		NodeID:          NodeID("$("+EnvPodNamespace+")", "$("+EnvPodName+")"),
		ServerURI:       ServerURI,
		CertificateFile: CertificateFile, KeyFile: KeyFile, BundleFile: BundleFile,
		SNI: true,
	}
}

// JSON is b as grpc-go reads it (GRPC_XDS_BOOTSTRAP_CONFIG): one xDS server without TLS (a unix
// socket on the node), the node and its metadata, the file_watcher certificate provider, and the
// name template of an xDS-enabled server's listeners (ServerListenerTemplate).
func (b Bootstrap) JSON() ([]byte, error) {
	if b.NodeID == "" || b.ServerURI == "" || b.CertificateFile == "" || b.KeyFile == "" || b.BundleFile == "" {
		return nil, fmt.Errorf("proxyless bootstrap: node ID, server URI and the three certificate files must all be set: %+v", b)
	}
	metadata := map[string]string{MetadataProxyless: MetadataTrue}
	if b.SNI {
		metadata[MetadataSNI] = MetadataTrue
	}
	doc := bootstrapJSON{
		XDSServers: []xdsServer{{ServerURI: b.ServerURI, ChannelCreds: []channelCreds{{Type: "insecure"}}, ServerFeatures: []string{"xds_v3"}}},
		Node:       node{ID: b.NodeID, Metadata: metadata},
		CertificateProviders: map[string]certificateProvider{CertificateProvider: {PluginName: fileWatcher, Config: fileWatcherConfig{
			CertificateFile: b.CertificateFile, PrivateKeyFile: b.KeyFile, CACertificateFile: b.BundleFile, RefreshInterval: refreshInterval,
		}}},
		ServerListenerTemplate: ServerListenerTemplate,
	}
	return json.Marshal(doc)
}

// The bootstrap's JSON shape (grpc-go xds/bootstrap; gRFC A27 and A29).
type bootstrapJSON struct {
	XDSServers             []xdsServer                    `json:"xds_servers"`
	Node                   node                           `json:"node"`
	CertificateProviders   map[string]certificateProvider `json:"certificate_providers"`
	ServerListenerTemplate string                         `json:"server_listener_resource_name_template"`
}

type xdsServer struct {
	ServerURI      string         `json:"server_uri"`
	ChannelCreds   []channelCreds `json:"channel_creds"`
	ServerFeatures []string       `json:"server_features"`
}

type channelCreds struct {
	Type string `json:"type"`
}

type node struct {
	ID       string            `json:"id"`
	Metadata map[string]string `json:"metadata"`
}

type certificateProvider struct {
	PluginName string            `json:"plugin_name"`
	Config     fileWatcherConfig `json:"config"`
}

type fileWatcherConfig struct {
	CertificateFile   string `json:"certificate_file"`
	PrivateKeyFile    string `json:"private_key_file"`
	CACertificateFile string `json:"ca_certificate_file"`
	RefreshInterval   string `json:"refresh_interval"`
}
