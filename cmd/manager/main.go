// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Command manager runs the mesh's control plane: the MeshService controller, the generated
// Service, route status and the admission webhooks. Several replicas may run; one leads.
package main

import (
	"crypto/tls"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	_ "k8s.io/client-go/plugin/pkg/client/auth"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	configv1 "github.com/aether-mesh/aether-operator/api/config/v1"
	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/certrotation"
	"github.com/aether-mesh/aether-operator/internal/manager"
	"github.com/aether-mesh/aether-operator/internal/registration"
	"github.com/aether-mesh/aether-operator/internal/resolve"
	"github.com/aether-mesh/aether-operator/internal/spireregistrar"
	"github.com/aether-mesh/aether-operator/internal/version"
	"github.com/aether-mesh/aether-operator/internal/webhook"
	"github.com/aether-mesh/aether-operator/internal/workloadidentity"
)

func main() {
	var (
		metricsAddr, probeAddr, webhookCertDir, webhookHost, meshDomain string
		webhookPort                                                     int
		secureMetrics                                                   bool
		election                                                        manager.Election
	)
	flag.StringVar(&metricsAddr, "metrics-bind-address", "0", "Address of the metrics endpoint (:8443 for HTTPS); 0 disables it.")
	flag.BoolVar(&secureMetrics, "metrics-secure", true, "Serve metrics over HTTPS with authentication and authorization.")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "Address of the /healthz and /readyz endpoints.")
	flag.StringVar(&webhookCertDir, "webhook-cert-dir", "", "Directory holding tls.crt and tls.key for the webhook server (reloaded on change).")
	flag.StringVar(&webhookHost, "webhook-host", "", "Address the webhook server listens on (all addresses when empty).")
	flag.IntVar(&webhookPort, "webhook-port", 9443, "Port the webhook server listens on.")
	flag.StringVar(&meshDomain, "mesh-domain", resolve.DefaultMeshDomain, "The mesh's DNS domain, also the SPIFFE trust domain.")
	election.BindFlags(flag.CommandLine)
	issuerFlag := flag.String(workloadidentity.IssuerFlag, string(workloadidentity.SPIRE), workloadidentity.IssuerFlagUsage)
	var knobs tuning
	knobs.bindFlags(flag.CommandLine)
	identityGate := flag.Bool("identity-gate", true, "Inject the identity gate (the init container aether-identity-ready, which holds a mesh pod until SPIRE has issued its SVID) into mesh pods; a pod opts out with the annotation aether.io/identity-gate: \"false\".")
	identityImage := flag.String("identity-image", webhook.DefaultIdentityImage, "The image of the identity containers the pod webhook injects (the operator's: it holds /aether-identity).")
	var spire spireFlags
	spire.bindFlags(flag.CommandLine)
	var rotation rotationFlags
	rotation.bindFlags(flag.CommandLine)
	ignoredList := flag.String("ignored-namespaces", strings.Join(registration.DefaultIgnoredNamespaces, ","), "Comma-separated namespaces the mesh never takes, whatever their pods' labels; the namespace this process runs in (POD_NAMESPACE, from the downward API) is added.")
	logOpts := zap.Options{}
	logOpts.BindFlags(flag.CommandLine)
	printVersion := flag.Bool("version", false, "Print the version, the commit and the Go version of this binary, and exit.")
	flag.Parse()
	if *printVersion {
		fmt.Println(version.Line("aether-manager"))
		return
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&logOpts)))
	log := ctrl.Log.WithName("setup")

	if errs := validation.IsDNS1123Subdomain(meshDomain); len(errs) > 0 {
		fmt.Fprintf(os.Stderr, "manager: --mesh-domain=%q is not a DNS domain (%s); it names services (<svc>.<ns>.<domain>) and is the SPIFFE trust domain, for example aether.internal\n",
			meshDomain, strings.Join(errs, "; "))
		os.Exit(2)
	}

	issuer, err := workloadidentity.ParseIssuer(*issuerFlag)
	if err != nil {
		fmt.Fprintf(os.Stderr, "manager: %v\n", err)
		os.Exit(2)
	}

	if err := knobs.check(); err != nil {
		fmt.Fprintf(os.Stderr, "manager: %v\n", err)
		os.Exit(2)
	}
	if err := election.Check(); err != nil {
		fmt.Fprintf(os.Stderr, "manager: %v\n", err)
		os.Exit(2)
	}
	registrar, err := spire.config(meshDomain, os.Getenv("POD_NAMESPACE"))
	if err != nil {
		fmt.Fprintf(os.Stderr, "manager: %v\n", err)
		os.Exit(2)
	}

	var certs *certrotation.Rotation
	if rc, err := rotation.config(os.Getenv("POD_NAMESPACE"), webhookCertDir); err != nil {
		fmt.Fprintf(os.Stderr, "manager: %v\n", err)
		os.Exit(2)
	} else if rc != nil && !spire.registrarOnly {
		certs = certrotation.New(*rc)
	}

	ignored, err := registration.ParseIgnoredNamespaces(*ignoredList)
	if err != nil {
		fmt.Fprintf(os.Stderr, "manager: %v\n", err)
		os.Exit(2)
	}
	ignored = ignored.With(os.Getenv("POD_NAMESPACE"))

	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(meshv1alpha1.AddToScheme(scheme))
	utilruntime.Must(configv1.AddToScheme(scheme))
	utilruntime.Must(gwapiv1.Install(scheme))

	// HTTP/2 stays off on the servers this process exposes (CVE-2023-44487, rapid reset).
	http1Only := func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }
	metricsOpts := metricsserver.Options{BindAddress: metricsAddr, SecureServing: secureMetrics, TLSOpts: []func(*tls.Config){http1Only}}
	if secureMetrics {
		metricsOpts.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	cfg := ctrl.GetConfigOrDie()
	knobs.apply(cfg)
	// The time each request waits on the client's limiter, and each request's latency: what an
	// operator tuning --kube-api-qps and --max-concurrent-reconciles reads.
	ctrlmetrics.RegisterRESTClientMetrics(ctrlmetrics.MetricRateLimiterLatency, ctrlmetrics.MetricRequestLatency)
	opts := manager.Options(knobs.workers, election)
	opts.Scheme = scheme
	opts.PprofBindAddress = knobs.pprofAddr
	opts.Metrics = metricsOpts
	opts.WebhookServer = crwebhook.NewServer(crwebhook.Options{Host: webhookHost, Port: webhookPort, CertDir: webhookCertDir, TLSOpts: []func(*tls.Config){http1Only}})
	if certs != nil {
		// The server reads its certificate when it starts: it waits for the rotation's.
		opts.WebhookServer = certs.Gate(opts.WebhookServer)
		certs.RestrictCache(&opts.Cache)
	}
	opts.HealthProbeBindAddress = probeAddr
	if spire.registrarOnly {
		// The sidecar reads MeshServices' identities and nothing else, serves no webhook, and
		// leads on its own lease: it runs beside the SPIRE server, not instead of the manager.
		opts.Cache = spireregistrar.CacheOptions()
		opts.Client = client.Options{}
		opts.LeaderElectionID = spireregistrar.LeaderElectionID
	}
	ctx := ctrl.SetupSignalHandler()
	if err := manager.WaitForAPIServer(ctx, cfg, probeAddr, log); err != nil {
		log.Error(err, "Stopped while waiting for the API server")
		os.Exit(1)
	}
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		log.Error(err, "Failed to create the manager")
		os.Exit(1)
	}
	if certs != nil {
		if err := certs.Add(ctx, mgr); err != nil {
			log.Error(err, "Failed to set up the webhook certificate's rotation")
			os.Exit(1)
		}
	}
	if registrar != nil {
		if err := setupRegistrar(mgr, spire, *registrar); err != nil {
			log.Error(err, "Failed to set up the SPIRE registrar")
			os.Exit(1)
		}
	}
	if spire.registrarOnly {
		utilruntime.Must(mgr.AddHealthzCheck("healthz", healthz.Ping))
		utilruntime.Must(mgr.AddReadyzCheck("readyz", healthz.Ping))
	} else {
		// SPIRE issues the identities unless --identity-issuer=none: then no identity container
		// is injected, and raw TCP is refused in every dial surface.
		setupControlPlane(mgr, log, manager.Config{MeshDomain: meshDomain, Issuer: issuer, Ignored: ignored, BatchWindow: knobs.batchWindow,
			Identity: webhook.Identity{SPIRE: issuer.Issues(), Gate: *identityGate, Image: *identityImage}})
	}
	log.Info("Starting manager", "meshDomain", meshDomain, "identityIssuer", issuer.String(), "ignoredNamespaces", ignored.String(),
		"identityGate", *identityGate, "certRotation", certs != nil, "identityImage", *identityImage, "spireServerSocket", spire.socket, "spireRegistrarOnly", spire.registrarOnly,
		"maxConcurrentReconciles", knobs.workers, "kubeAPIQPS", knobs.qps, "kubeAPIBurst", knobs.burst, "batchWindow", knobs.batchWindow,
		"leaderElection", election.Enabled, "leaseDuration", election.LeaseDuration, "renewDeadline", election.RenewDeadline, "retryPeriod", election.RetryPeriod)
	if err := mgr.Start(ctx); err != nil {
		log.Error(err, "Manager stopped")
		os.Exit(1)
	}
}

// setupControlPlane registers the MeshService and route controllers, the webhooks and the probes.
func setupControlPlane(mgr ctrl.Manager, log logr.Logger, c manager.Config) {
	skipped, err := manager.Setup(mgr, c)
	if err != nil {
		log.Error(err, "Failed to set up the manager")
		os.Exit(1)
	}
	if len(skipped) > 0 {
		log.Info("Gateway API CRDs not installed: no route status for these kinds", "kinds", skipped)
	}
	if !c.Issuer.Issues() {
		log.Info("Running without a workload-identity issuer: every raw-TCP spelling of every dial surface is refused, and each MeshService with a TCP port gets a Warning Event",
			"flag", "--"+workloadidentity.IssuerFlag, "reason", meshv1alpha1.ServiceReasonTCPRefusedNoIdentity)
	}
}

// setupRegistrar registers the SPIRE registrar, connected (lazily) to the SPIRE server's socket.
func setupRegistrar(mgr ctrl.Manager, spire spireFlags, cfg spireregistrar.Config) error {
	conn, err := spireregistrar.Dial(spire.socket)
	if err != nil {
		return fmt.Errorf("--spire-server-socket=%q: %w", spire.socket, err)
	}
	return (&spireregistrar.Registrar{Reader: mgr.GetClient(), Conn: conn, Config: cfg, Resync: spire.resync}).SetupWithManager(mgr)
}
