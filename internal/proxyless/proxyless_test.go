// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package proxyless

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestBootstrap: the bootstrap names the node, its metadata, the server, the file_watcher
// provider the clusters name, and the name template of an xDS-enabled server's listeners.
// (grpc-go parses it lazily, when a channel first resolves: the agent's proxyless tests dial
// with JSON's output, so grpc-go's own reading of it is proven there.)
func TestBootstrap(t *testing.T) {
	for name, b := range map[string]Bootstrap{
		"a pod's":  Default(),
		"a test's": {NodeID: NodeID("shop", "client-0"), ServerURI: "unix:///tmp/x/xds.sock", CertificateFile: "/tmp/c", KeyFile: "/tmp/k", BundleFile: "/tmp/b"},
	} {
		t.Run(name, func(t *testing.T) {
			raw, err := b.JSON()
			if err != nil {
				t.Fatal(err)
			}
			var doc struct {
				Node struct {
					ID       string            `json:"id"`
					Metadata map[string]string `json:"metadata"`
				} `json:"node"`
				Servers []struct {
					URI string `json:"server_uri"`
				} `json:"xds_servers"`
				Providers map[string]struct {
					Plugin string            `json:"plugin_name"`
					Config map[string]string `json:"config"`
				} `json:"certificate_providers"`
				ServerTemplate string `json:"server_listener_resource_name_template"`
			}
			if err := json.Unmarshal(raw, &doc); err != nil {
				t.Fatal(err)
			}
			if doc.Node.ID != b.NodeID || doc.Node.Metadata[MetadataProxyless] != MetadataTrue ||
				(doc.Node.Metadata[MetadataSNI] == MetadataTrue) != b.SNI || doc.Providers[CertificateProvider].Plugin != "file_watcher" ||
				len(doc.Servers) != 1 || doc.Servers[0].URI != b.ServerURI ||
				doc.Providers[CertificateProvider].Config["certificate_file"] != b.CertificateFile ||
				doc.Providers[CertificateProvider].Config["private_key_file"] != b.KeyFile ||
				doc.Providers[CertificateProvider].Config["ca_certificate_file"] != b.BundleFile {
				t.Errorf("bootstrap %s", raw)
			}
			// Without the template grpc-go's xds.NewGRPCServer refuses to start.
			if doc.ServerTemplate != ServerListenerTemplate || ServerListener("[::]:9090") != "grpc/server?xds.resource.listening_address=[::]:9090" {
				t.Errorf("server_listener_resource_name_template %q, want %q", doc.ServerTemplate, ServerListenerTemplate)
			}
		})
	}
	if _, err := (Bootstrap{NodeID: "a/b"}).JSON(); err == nil || !strings.Contains(err.Error(), "must all be set") {
		t.Errorf("an incomplete bootstrap: %v", err)
	}
}

// TestNodeID: a pod's node ID reads back, the longest a namespace and a pod name can make too; a
// node name (the node's Envoy's ID), other shapes and a longer ID are not a proxyless ID.
func TestNodeID(t *testing.T) {
	if ns, name, ok := ParseNodeID(NodeID("shop", "client-0")); !ok || ns != "shop" || name != "client-0" {
		t.Errorf("ParseNodeID(NodeID(shop, client-0)) = %q, %q, %v", ns, name, ok)
	}
	if _, _, ok := ParseNodeID(NodeID(strings.Repeat("n", 63), strings.Repeat("p", 253))); !ok {
		t.Error("ParseNodeID refused the longest pod's ID")
	}
	for _, id := range []string{"node-a", "", "/x", "x/", "a/b/c", "shop/" + strings.Repeat("x", MaxNodeIDLength)} {
		if _, _, ok := ParseNodeID(id); ok {
			t.Errorf("ParseNodeID(%q) took it", id)
		}
	}
}
