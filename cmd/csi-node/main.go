// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Command aether-csi-node is the mesh's CSI node plugin, csi.aether.io: it gives each pod with an
// inline csi.aether.io volume a small tmpfs at /run/aether/uds/<pod-uid>, owned root:<fsGroup>,
// mode 2770, bound onto the volume's mount path, where the app creates the Unix socket the node's
// proxy delivers to; a volume with volumeAttributes aether.io/volume: spire-agent-sockets gets the
// node's SPIRE agent socket directory instead, read-only. It registers itself with the kubelet (no registrar sidecar) and runs in the
// DaemonSet of config/csi (internal/csinode says how).
//
//	aether-csi-node --node-name NODE [--csi-socket PATH] [--registration-dir DIR] [--socket-dir DIR] [--tmpfs-size 1Mi] [--spire-agent-sockets DIR]
//
// Exit codes: 0 stopped by a signal, 1 failed or refused by the kubelet (said on stderr; the
// DaemonSet restarts it and it registers again), 2 bad usage.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/aether-mesh/aether-operator/internal/command"
	"github.com/aether-mesh/aether-operator/internal/csinode"
	"github.com/aether-mesh/aether-operator/internal/version"
)

func main() { command.Main(run) }

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fset := flag.NewFlagSet("aether-csi-node", flag.ContinueOnError)
	fset.SetOutput(stderr)
	nodeName := fset.String("node-name", "", "this node's name, the plugin's node ID (required; the DaemonSet passes spec.nodeName)")
	csiSocket := fset.String("csi-socket", csinode.DefaultCSISocket, "the CSI socket, a path on the node the kubelet dials")
	regDir := fset.String("registration-dir", csinode.DefaultRegistrationDir, "the kubelet's plugin registration directory")
	socketDir := fset.String("socket-dir", csinode.DefaultSocketDir, "where the pods' socket directories are mounted, one per pod UID")
	spireSockets := fset.String("spire-agent-sockets", "", "the node's SPIRE agent socket directory, which a volume with volumeAttributes "+csinode.VolumeAttribute+": "+csinode.VolumeSPIREAgentSockets+" gets read-only (the identity containers' way to the Workload API); \"\": such volumes are refused")
	size := fset.String("tmpfs-size", "1Mi", "each pod's tmpfs size, a Kubernetes quantity")
	showVersion := fset.Bool("version", false, "print the version and exit")
	if err := fset.Parse(args); err != nil {
		return 2
	}
	if *showVersion {
		_, _ = fmt.Fprintln(stdout, version.Line("aether-csi-node"))
		return 0
	}
	if *nodeName == "" {
		_, _ = fmt.Fprintln(stderr, "aether-csi-node: --node-name is empty: pass the node's name (env NODE_NAME from spec.nodeName)")
		return 2
	}
	q, err := resource.ParseQuantity(*size)
	if err != nil || q.Value() < 4096 {
		_, _ = fmt.Fprintf(stderr, "aether-csi-node: --tmpfs-size=%q: want a quantity of at least 4Ki, like 1Mi\n", *size)
		return 2
	}
	logger := log.New(stderr, "aether-csi-node: ", log.LstdFlags|log.LUTC|log.Lmsgprefix)
	srv := &csinode.Server{
		NodeName:          *nodeName,
		Volumes:           csinode.Volumes{Dir: *socketDir, Size: q.Value()},
		SPIREAgentSockets: *spireSockets,
		Log:               logger,
	}
	if err := csinode.Serve(ctx, srv, csinode.Sockets{CSI: *csiSocket, RegistrationDir: *regDir}); err != nil {
		logger.Print(err)
		return 1
	}
	return 0
}
