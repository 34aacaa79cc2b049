// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"path"
	"path/filepath"
	"strings"
)

// operatorBinaries is every binary of the operator image, where it is built from and where it
// goes: the manager (the Deployment's entrypoint), the node agent (its DaemonSet runs /agent), the
// CNI plugin the agent's init container copies onto each node, the identity container the pod
// webhook injects, and the CSI node plugin (config/csi's DaemonSet). Adding a binary to the image is one line here and one in the Dockerfile
// (TestDockerfileBuildsTheSameImage fails until both have it).
var operatorBinaries = []binary{
	{Name: "manager", Package: "./cmd/manager"},
	{Name: "agent", Package: "./cmd/agent"},
	{Name: "aether-cni", Package: "./cmd/cni"},
	{Name: "aether-identity", Package: "./cmd/identity"},
	{Name: "aether-csi-node", Package: "./cmd/csi-node"},
}

// The test-only images: the cluster tier's workload and the node's sandbox (pause) image.
var (
	testServerBinary = binary{Name: "testserver", Package: "./hack/cluster/testserver"}
	pauseBinary      = binary{Name: "pause", Package: "./hack/cluster/pause"}
)

// binary is one Go binary: its file name (in the image, at /<Name>) and its package.
type binary struct {
	Name    string
	Package string
}

// Users: the operator and SPIRE's server run as nonroot (65532, distroless's nonroot user, which
// config/ names in runAsUser), pause as 65535 (the kubelet's sandbox), SPIRE's agent as root (its
// sockets go into the host's root-owned /run/spire directories).
const (
	nonroot   = "65532:65532"
	pauseUser = "65535:65535"
	root      = "0:0"
)

// caCertificates is where the operator image's CA bundle is read from on the build machine and
// written to in the image: Debian's ca-certificates package (what Go's crypto/x509 reads on Linux).
const caCertificates = "/etc/ssl/certs/ca-certificates.crt"

// Names the cluster tier imports (config/ and the e2e specs use them) and the archives
// hack/cluster/up.sh imports from the output directory, <archive>.tar.
const (
	operatorName    = "docker.io/aether/operator:dev"
	operatorArchive = "operator"
	testServerName  = "docker.io/aether/testserver:dev"
	pauseName       = "registry.k8s.io/pause:aether"
	spireServerName = "docker.io/aether/spire-server:"
	spireAgentName  = "docker.io/aether/spire-agent:"
)

// shippedArchives are the images images-push pushes: the operator's and SPIRE's; the test server
// and pause exist for the cluster tier only.
var shippedArchives = []string{operatorArchive, "spire-server", "spire-agent"}

// spec is one image: its name, the archive it is written to, and its content for one platform.
type spec struct {
	Name       string // the reference containerd imports it as
	Archive    string // <Archive>.tar and <Archive>.digest in the output directory
	Entrypoint []string
	User       string
	Env        []string
	Labels     map[string]string
	Files      []file
}

// file is one file of an image, placed at Path with Mode: read from Source on disk, or Data
// itself when Source is empty, or, when Link is set, a symbolic link to Link.
type file struct {
	Source string
	Data   []byte
	Link   string
	Path   string
	Mode   int64
}

// stamp is what the operator image says about itself: the binaries' --version and its labels.
type stamp struct {
	Version string
	Commit  string
}

// operatorSpec is the operator image for the binaries in binDir (one file per operatorBinaries).
func operatorSpec(binDir, caFile string, s stamp) spec {
	sp := spec{
		Name: operatorName, Archive: operatorArchive,
		Entrypoint: []string{"/manager"}, User: nonroot,
		Labels: map[string]string{
			"org.opencontainers.image.title":    "aether-operator",
			"org.opencontainers.image.version":  s.Version,
			"org.opencontainers.image.revision": s.Commit,
			"org.opencontainers.image.licenses": "Apache-2.0",
		},
		Files: []file{{Source: caFile, Path: caCertificates, Mode: 0o644}},
	}
	for _, b := range operatorBinaries {
		sp.Files = append(sp.Files, file{Source: filepath.Join(binDir, b.Name), Path: "/" + b.Name, Mode: 0o755})
	}
	return sp
}

// testSpecs are the cluster tier's test server and pause images (no labels: they are not shipped).
func testSpecs(binDir string) []spec {
	return []spec{
		{Name: testServerName, Archive: "testserver", Entrypoint: []string{"/testserver"}, User: nonroot,
			Files: []file{{Source: filepath.Join(binDir, testServerBinary.Name), Path: "/testserver", Mode: 0o755}}},
		{Name: pauseName, Archive: "pause", Entrypoint: []string{"/pause"}, User: pauseUser,
			Files: []file{{Source: filepath.Join(binDir, pauseBinary.Name), Path: "/pause", Mode: 0o755}}},
	}
}

// spireSpecs are SPIRE's server and agent images (config/spire) from the binaries in spireDir
// (hack/build-spire.sh's), at SPIRE's own image paths.
func spireSpecs(spireDir, version string) []spec {
	one := func(component, name, user string) spec {
		return spec{
			Name: name + version, Archive: component,
			Entrypoint: []string{"/opt/spire/bin/" + component, "run"}, User: user,
			Labels: map[string]string{
				"org.opencontainers.image.title":    component,
				"org.opencontainers.image.version":  version,
				"org.opencontainers.image.licenses": "Apache-2.0",
			},
			Files: []file{{Source: filepath.Join(spireDir, component), Path: "/opt/spire/bin/" + component, Mode: 0o755}},
		}
	}
	return []spec{one("spire-server", spireServerName, nonroot), one("spire-agent", spireAgentName, root)}
}

// repoAndTag splits an image name into its repository's last path element and its tag: what
// images-push names the image under the registry prefix.
func repoAndTag(name string) (repo, tag string, err error) {
	i := strings.LastIndex(name, ":")
	if i < 0 || strings.Contains(name[i:], "/") {
		return "", "", fmt.Errorf("image name %q has no tag", name)
	}
	return path.Base(name[:i]), name[i+1:], nil
}
