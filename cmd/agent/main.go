// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Command agent is the node agent, one per node (a DaemonSet): it registers its node's pods as
// MeshEndpoints, probes their health, serves xDS to the node's Envoy and programs capture rules.
// Registration and delegated liveness run here; xDS and capture arrive with their issues.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	_ "k8s.io/client-go/plugin/pkg/client/auth"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/agent"
	"github.com/aether-mesh/aether-operator/internal/registration"
	"github.com/aether-mesh/aether-operator/internal/resolve"
	"github.com/aether-mesh/aether-operator/internal/xds"
)

func main() {
	var nodeName, meshDomain, metricsAddr, probeAddr, envoyBootstrap string
	var clusterView bool
	health := agent.DefaultHealthOptions
	flag.StringVar(&nodeName, "node-name", "", "Name of the node this agent serves (required; from the downward API spec.nodeName).")
	flag.StringVar(&meshDomain, "mesh-domain", resolve.DefaultMeshDomain, "The mesh's DNS domain, also the SPIFFE trust domain.")
	flag.StringVar(&metricsAddr, "metrics-bind-address", ":9090", "Address of the Prometheus metrics endpoint; 0 disables it.")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":9091", "Address of the /healthz and /readyz endpoints.")
	flag.DurationVar(&health.Interval, "health-interval", health.Interval, "Time between health probes of one endpoint.")
	flag.DurationVar(&health.Timeout, "health-timeout", health.Timeout, "Timeout of one health probe.")
	flag.IntVar(&health.FailureThreshold, "health-failure-threshold", health.FailureThreshold, "Consecutive failed probes that make an endpoint Unhealthy.")
	flag.StringVar(&envoyBootstrap, "envoy-bootstrap", "", "Path (ending in .yaml or .json) where the agent writes, at start, the bootstrap of the node's Envoy (node ID = --node-name, ADS on the agent's xDS socket "+xds.DefaultXDSSocket+", admin on "+xds.DefaultAdminAddress+"); empty: write none.")
	flag.BoolVar(&clusterView, "cluster-view", false, "Keep the cluster-wide view of MeshServices and MeshEndpoints the xDS builder reads (its objects are counted by the gauge aether_agent_view_objects).")
	ignoredList := flag.String("ignored-namespaces", strings.Join(registration.DefaultIgnoredNamespaces, ","), "Comma-separated namespaces the mesh never takes, whatever their pods' labels; the namespace this process runs in (POD_NAMESPACE, from the downward API) is added.")
	flag.IntVar(&health.SuccessThreshold, "health-success-threshold", health.SuccessThreshold, "Consecutive successful probes that make an endpoint Healthy.")
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	log := ctrl.Log.WithName("setup")

	if nodeName == "" {
		fmt.Fprintln(os.Stderr, "agent: --node-name is required: set it from the downward API (fieldRef spec.nodeName) in the DaemonSet")
		os.Exit(2)
	}

	ignored, err := registration.ParseIgnoredNamespaces(*ignoredList)
	if err != nil {
		fmt.Fprintf(os.Stderr, "agent: %v\n", err)
		os.Exit(2)
	}
	ignored = ignored.With(os.Getenv("POD_NAMESPACE"))

	if envoyBootstrap != "" {
		if err := writeEnvoyBootstrap(envoyBootstrap, xds.BootstrapConfig{NodeID: nodeName}); err != nil {
			fmt.Fprintf(os.Stderr, "agent: writing the Envoy bootstrap: %v\n", err)
			os.Exit(2)
		}
		log.Info("Wrote the node's Envoy bootstrap", "path", envoyBootstrap, "nodeID", nodeName, "xdsSocket", xds.DefaultXDSSocket)
	}

	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(meshv1alpha1.AddToScheme(scheme))
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress: probeAddr,
		Cache:                  agent.CacheOptions(nodeName),
	})
	if err != nil {
		log.Error(err, "Failed to create the agent's manager")
		os.Exit(1)
	}
	options := agent.Options{NodeName: nodeName, Health: health, IgnoredNamespaces: ignored}
	if clusterView {
		if options.View, err = agent.NewView(mgr.GetConfig(), scheme); err != nil {
			log.Error(err, "Failed to create the agent's cluster view")
			os.Exit(1)
		}
	}
	if err := agent.Setup(mgr, options); err != nil {
		log.Error(err, "Failed to set up the agent")
		os.Exit(1)
	}
	utilruntime.Must(mgr.AddHealthzCheck("healthz", healthz.Ping))
	utilruntime.Must(mgr.AddReadyzCheck("readyz", healthz.Ping))

	log.Info("Starting agent", "node", nodeName, "meshDomain", meshDomain, "ignoredNamespaces", ignored.String(), "clusterView", clusterView)
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		log.Error(err, "Agent stopped")
		os.Exit(1)
	}
}
