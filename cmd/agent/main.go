// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Command agent is the node agent, one per node (a DaemonSet): it registers its node's pods as
// MeshEndpoints, probes their health, serves xDS to the node's Envoy, takes each pod's network
// namespace from the CNI plugin (cmd/cni) and programs capture rules in it. Registration,
// delegated liveness, xDS serving, the CNI hand-over and capture (with xDS serving) run here.
//
// Two subcommands install the CNI plugin, for the DaemonSet's init container: `agent install-cni`
// copies the plugin binary into the node's CNI bin dir and chains it last into the node's
// conflist; `agent uninstall-cni` takes it out again. `agent uninstall` takes the mesh off the
// node: the plugin, and every pod's capture table (the agent does both itself when it stops
// because its DaemonSet is deleted). Two more serve the node Envoy's own pod (config/envoy),
// whose image has no HTTP client: `agent envoy-helper` answers its readiness probe, and
// `agent envoy-drain` drains it before it is stopped (envoy.go).
package main

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"github.com/go-logr/logr"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	_ "k8s.io/client-go/plugin/pkg/client/auth"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	configv1 "github.com/aether-mesh/aether-operator/api/config/v1"
	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/accesslog"
	"github.com/aether-mesh/aether-operator/internal/agent"
	"github.com/aether-mesh/aether-operator/internal/agent/svid"
	"github.com/aether-mesh/aether-operator/internal/cachewait"
	"github.com/aether-mesh/aether-operator/internal/demand"
	"github.com/aether-mesh/aether-operator/internal/meshdns"
	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/portspec"
	"github.com/aether-mesh/aether-operator/internal/proxyconfig"
	"github.com/aether-mesh/aether-operator/internal/proxyless"
	"github.com/aether-mesh/aether-operator/internal/registration"
	"github.com/aether-mesh/aether-operator/internal/resolve"
	"github.com/aether-mesh/aether-operator/internal/version"
	"github.com/aether-mesh/aether-operator/internal/workloadidentity"
	"github.com/aether-mesh/aether-operator/internal/xds"
	"github.com/aether-mesh/aether-operator/internal/xdsserver"
)

func main() {
	agent.ListThenWatch() // before any client reads client-go's feature gates
	if code, ok := runSubcommand(os.Args[1:]); ok {
		os.Exit(code)
	}
	var nodeName, meshDomain, metricsAddr, probeAddr, envoyBootstrap string
	health := agent.DefaultHealthOptions
	flag.StringVar(&nodeName, "node-name", "", "Name of the node this agent serves (required; from the downward API spec.nodeName).")
	flag.StringVar(&meshDomain, "mesh-domain", resolve.DefaultMeshDomain, "The mesh's DNS domain, also the SPIFFE trust domain.")
	issuerFlag := flag.String(workloadidentity.IssuerFlag, string(workloadidentity.SPIRE), workloadidentity.IssuerFlagUsage)
	flag.StringVar(&metricsAddr, proxyconfig.MetricsAddressFlag, proxyconfig.DefaultMetricsAddress, "Address of the Prometheus metrics endpoint, which also serves --"+proxyconfig.Flag+"; 0 disables it. With --metrics-secure, HTTPS and only for a caller allowed to get the path.")
	secureMetrics := flag.Bool(proxyconfig.MetricsSecureFlag, true, "Serve metrics over HTTPS, each request authenticated (a bearer token by a TokenReview, or a client certificate of the API server's client CA) and authorized (SubjectAccessReview: get on /metrics, the metrics-reader ClusterRole) by the API server. false: plain HTTP to anyone who reaches the port, which in the DaemonSet is every address of the node, and no --"+proxyconfig.Flag+".")
	metricsCertDir := flag.String("metrics-cert-dir", "", "Directory holding tls.crt and tls.key for the metrics endpoint (reloaded on change); empty: a self-signed certificate made at start.")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":9091", "Address of the /healthz and /readyz endpoints.")
	flag.DurationVar(&health.Interval, "health-interval", health.Interval, "Time between health probes of one endpoint.")
	flag.DurationVar(&health.Timeout, "health-timeout", health.Timeout, "Timeout of one health probe.")
	flag.IntVar(&health.FailureThreshold, "health-failure-threshold", health.FailureThreshold, "Consecutive failed probes that make an endpoint Unhealthy.")
	flag.StringVar(&envoyBootstrap, "envoy-bootstrap", "", "Path (ending in .yaml or .json) where the agent writes, at start, the bootstrap of the node's Envoy (node ID = --node-name, ADS on --xds-address's unix socket, admin on "+xds.DefaultAdminAddress+"); empty: write none. Needs a unix --xds-address.")
	xdsAddress := flag.String("xds-address", xdsserver.DefaultAddress, "Where the agent serves xDS (ADS: state of the world and delta) to the node's Envoy, node ID = --node-name: unix:///path (its directory is created 0750, a stale socket replaced) or tcp://<loopback IP>:<port> (the stream carries no TLS: loopback only). Empty: no xDS serving, and no cluster-wide view of the mesh.")
	captureMode := flag.String("capture-mode", string(model.CaptureSurface), "How a meshed pod's outbound TCP reaches its proxy, unless its annotation aether.io/capture-mode says otherwise: scoped (the mesh ports 18081 and 18082), surface (every dial surface's VIP and port) or all.")
	upstreamsFlag := flag.String("upstreams", string(model.UpstreamsDeclared), "Which services the node's Envoy carries before a pod dials them: declared (per local identity, its own services, those its pods declare in "+portspec.AnnotationUpstreams+" and the backends of their routes; any other service is fetched on demand the first time a request names it, counted in aether_agent_upstreams_miss_total, and dropped after "+demand.IdleTTL.String()+" unused; Envoy's ADS stream is then delta xDS) or all (every service for every local identity: the node's clusters grow as services × ports × local identities).")
	hopHTTP3 := flag.Bool(hopProtocolFlag, false, "Make the hop between node proxies prefer HTTP/3: every meshed pod's inbound also listens for QUIC on UDP 18008 in its network namespace (beside TCP 18008, the same mTLS and the same routes and AccessPolicies), and every HTTP request to a mesh service tries HTTP/3 first and falls back to HTTP/2 over TLS, which stays the default (false) until the data-plane benchmark says otherwise. Turn it on for every node at once (it changes the hop's SNI to <port>.<service>.<namespace>.<mesh domain>). It needs SVIDs that carry the DNS SANs <service>.<namespace>.<mesh domain> and *.<service>.<namespace>.<mesh domain>, which the SPIRE entries of config/spire do not: without them every HTTP/3 attempt is refused by the caller and the request rides HTTP/2. Envoy 1.40 opens the QUIC sockets in the node's network namespace, not the calling pod's: over HTTP/3 the destination sees the node's address, not the pod's (mTLS still names the caller). Needs --xds-address.")
	captureResync := flag.Duration("capture-resync", agent.DefaultCaptureResync, "With xDS serving, the period of the cheap check of every meshed pod's capture table (table inet aether in its network namespace, programmed when the CNI plugin hands the pod over): a table deleted, flushed or edited by hand is repaired within one period.")
	captureNever := flag.String("capture-never", "", "Comma-separated CIDRs (or addresses) that capture never redirects to the proxy, in any mode, beside loopback, link-local (169.254.0.0/16, fe80::/10: a cloud's metadata service) and the node's own addresses (its Node's InternalIP and ExternalIP, and its interfaces' but a dummy interface's such as kube-ipvs0, kept current while the agent runs; never a mesh VIP), which it never redirects either: e.g. a cloud's IPv6 metadata address fd00:ec2::254, or a range of the node network's services.")
	captureUID := flag.Int64("capture-exclude-uid", -1, "A user ID whose sockets capture never redirects, for a proxy of your own that opens its upstream connections inside the pods' namespaces without the mesh's socket mark; -1: none. The node's Envoy (config/envoy) marks its sockets instead (capture returns the mark first) and runs as user 0: leave it at -1, as excluding 0 would exempt every container running as root.")
	meshDNS := flag.Bool("mesh-dns", true, "With capture, serve the mesh DNS in every captured pod (127.0.0.1:18054 and [::1]:18054 in its network namespace) and redirect its DNS queries (UDP and TCP to port 53) there: <service>.<namespace>.<mesh domain> answers the service's VIP, another name under the mesh domain NXDOMAIN, and every other query goes to the resolver the pod addressed, unchanged. A pod with dnsPolicy None, or annotated aether.io/mesh-dns: \"false\", is left alone. false: no pod's DNS is touched.")
	meshDNSRate := flag.Float64("mesh-dns-rate", meshdns.DefaultRate, "With --mesh-dns, each pod's DNS query rate (queries per second, a token bucket of --mesh-dns-burst): a query over it is answered REFUSED and counted.")
	meshDNSBurst := flag.Int("mesh-dns-burst", meshdns.DefaultBurst, "With --mesh-dns, the burst of each pod's DNS query rate.")
	netnsTemplate := flag.String("netns-path-template", "", "Where no CNI plugin hands each pod's network namespace over (make run): a Go template of a pod's netns path over .Namespace, .Name and .UID, e.g. /var/run/netns/aether-{{.Namespace}}-{{.Name}}, used for a pod the plugin did not hand over. Empty: a pod whose netns was not handed over gets no listeners.")
	drainTail := flag.Duration("netns-drain-tail", agent.DefaultNetNSDrainTail, "How long a meshed pod's network namespace stays pinned after the CNI plugin's DEL (its sandbox deleted), and its listeners in the node Envoy's configuration, so that connections still finishing through them are not cut; they are withdrawn when it ends, and at once when the pod's sandbox is added again. 0: none (the listeners go with the next rebuild).")
	var cniOpts cniFlags
	cniOpts.bind(flag.CommandLine, "", "/host/opt/cni/bin")
	flag.IntVar(&health.SuccessThreshold, "health-success-threshold", health.SuccessThreshold, "Consecutive successful probes that make an endpoint Healthy.")
	nodeEnvoyPods := flag.String("node-envoy-pods", defaultNodeEnvoyPods, "The label selector of the node Envoy's pods (config/envoy's DaemonSet): the node's xDS socket (--xds-address: ADS, every local pod's private key by SDS, the access log) serves a process of a pod of this node in the agent's own namespace (POD_NAMESPACE) whose labels it selects, learned from the connection (the caller's cgroup names its pod: the agent must run in the host's PID namespace), and refuses every other caller (PermissionDenied, counted in aether_agent_xds_node_refused_total). Empty: no pod.")
	nodeEnvoyHost := flag.Bool("node-envoy-host", false, "Serve on the node's xDS socket, besides --node-envoy-pods, the node's own processes (in no pod's cgroup): an Envoy run on the node by hand or by a service manager, for a development node. A tcp --xds-address needs it, as its connections carry no peer credentials: it then serves whoever reaches the port.")
	proxylessAddress := flag.String("proxyless-xds-address", "", "Where the agent serves proxyless gRPC clients (pods annotated "+portspec.AnnotationProxyless+": \""+portspec.ProxylessGRPC+"\", which mount its directory): a unix socket, its directory created 0755 and the socket 0666, serving proxyless node IDs only, each stream the node ID of its caller's pod only (learned from the connection: the agent must run in the host's PID namespace); "+proxyless.DefaultNodeAddress+" in config/agent. Empty: none. Needs --xds-address.")
	spireAdminSocket := flag.String("spire-admin-socket", "", "Path of the SPIRE agent's admin socket, its Delegated Identity API (this agent must be one of its authorized_delegates): the agent fetches from it the X.509 SVIDs of the identities its node's meshed pods hold, and the trust bundle of --mesh-domain, and serves them to the node's Envoy by SDS. "+workloadidentity.NodeAdminSocketDir+"/"+workloadidentity.AdminSocketName+" with config/spire. Empty: no SVIDs are served (the TLS contexts' secrets stay absent). Needs --xds-address.")
	udsCSI := flag.Bool("uds-csi", true, "Deliver the inbound of a pod that serves on a Unix socket ("+portspec.AnnotationUDSSocket+", or an EndpointPolicy of a Service selecting it) to that socket, in its csi.aether.io volume, and read the EndpointPolicies (the chart's udsCsi.enabled). false: no policy is read, and a pod that declares a socket keeps TCP delivery, counted in aether_agent_uds_resolve_failures_total{reason=\"disabled\"}.")
	udsRoot := flag.String("uds-root", portspec.UDSHostRoot, "Where the csi.aether.io node plugin mounts each pod's socket directory on the node, <root>/<pod UID>: the node's proxy dials <root>/<pod UID>/<file>, which must fit a Unix socket address (107 bytes).")
	accessLogLines := flag.Bool("access-log-lines", true, "With xDS serving, write one line per request and per TCP connection the node's Envoy logs to the agent (its access log, streamed over --xds-address) to the agent's own log (kubectl logs). false: the access log is only counted (aether_agent_requests_total and the others).")
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	pprofAddr := flag.String("pprof-bind-address", "0", "Address of the Go profiler's endpoints (/debug/pprof/); 0 (the default) disables them. Plain HTTP: loopback only, for a test bench.")
	endpointTimes := flag.Bool("debug-endpoint-times", false, "Record, per MeshEndpoint, when this agent's probe made it Healthy and when the node's published xDS snapshot first held or dropped it, and serve them as JSON at "+agent.EndpointTimesPath+" on the metrics endpoint (under its authentication): what endpoint programming latency is measured from. Costs a walk of the snapshot's load assignments per publish.")
	proxyConfigOn := flag.Bool(proxyconfig.Flag, true, "With xDS serving, serve each pod's part of the node's published proxy configuration (its listeners, routes, clusters and endpoints, never a secret) at "+proxyconfig.Path+"<namespace>/<pod> on the metrics endpoint, under its authentication: a caller the API server vouches for (a bearer token, or a client certificate of its client CA) and allows get on that path (the "+proxyconfig.ReaderRole+" ClusterRole). kubectl aether proxy-config reads it through a port-forward to the agent's pod, with the user's own credentials. Not served with --metrics-secure=false or --metrics-bind-address=0.")
	printVersion := flag.Bool("version", false, "Print the version, the commit and the Go version of this binary, and exit.")
	flag.Parse()
	if *printVersion {
		fmt.Println(version.Line("aether-agent"))
		return
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	log := ctrl.Log.WithName("setup")

	if nodeName == "" {
		fmt.Fprintln(os.Stderr, "agent: --node-name is required: set it from the downward API (fieldRef spec.nodeName) in the DaemonSet")
		os.Exit(2)
	}

	ignored, err := cniOpts.ignoredNamespaces()
	if err == nil {
		err = cniOpts.check()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "agent: %v\n", err)
		os.Exit(2)
	}

	mode, issuer, err := parseModes(*captureMode, *issuerFlag)
	upstreams, upstreamsErr := model.ParseUpstreamsMode(*upstreamsFlag)
	if upstreamsErr != nil {
		err = errors.Join(err, fmt.Errorf("--upstreams: %w", upstreamsErr))
	}
	err = errors.Join(err, checkHopHTTP3(*hopHTTP3, *xdsAddress))
	if err != nil {
		fmt.Fprintf(os.Stderr, "agent: %v\n", err)
		os.Exit(2)
	}
	xdsAddr, proxylessAddr, err := parseXDSAddresses(*xdsAddress, *proxylessAddress)
	identities, identityErr := identitySource(*spireAdminSocket, *xdsAddress, meshDomain, issuer)
	envoyCallers, envoyErr := nodeEnvoy(*nodeEnvoyPods, *nodeEnvoyHost, os.Getenv("POD_NAMESPACE"), xdsAddr)
	if err = errors.Join(err, identityErr, envoyErr); err != nil {
		fmt.Fprintf(os.Stderr, "agent: %v\n", err)
		os.Exit(2)
	}
	captureOpts, err := captureOptions(*captureResync, *captureUID, *captureNever)
	if err == nil {
		captureOpts.DNS, err = dnsOptions(*meshDNS, *meshDNSRate, *meshDNSBurst)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "agent: %v\n", err)
		os.Exit(2)
	}
	netns, err := agent.ParseNetNSPathTemplate(*netnsTemplate)
	if err != nil {
		fmt.Fprintf(os.Stderr, "agent: --netns-path-template: %v\n", err)
		os.Exit(2)
	}
	drainTailOption, err := netnsDrainTail(*drainTail)
	if err != nil {
		fmt.Fprintf(os.Stderr, "agent: %v\n", err)
		os.Exit(2)
	}
	if envoyBootstrap != "" {
		if xdsAddr.Network != "unix" {
			fmt.Fprintf(os.Stderr, "agent: --envoy-bootstrap needs a unix --xds-address for the node's Envoy to connect to; it is %q\n", *xdsAddress)
			os.Exit(2)
		}
		if err := writeEnvoyBootstrap(envoyBootstrap, xds.BootstrapConfig{NodeID: nodeName, XDSSocket: xdsAddr.Path, Delta: upstreams.OnDemand()}); err != nil {
			fmt.Fprintf(os.Stderr, "agent: writing the Envoy bootstrap: %v\n", err)
			os.Exit(2)
		}
		log.Info("Wrote the node's Envoy bootstrap", "path", envoyBootstrap, "nodeID", nodeName, "xdsSocket", xdsAddr.Path)
	}

	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(meshv1alpha1.AddToScheme(scheme))
	utilruntime.Must(configv1.AddToScheme(scheme))
	utilruntime.Must(gwapiv1.Install(scheme)) // the view's routes (agent.NewView)
	cfg := ctrl.GetConfigOrDie()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                agent.MetricsOptions(metricsAddr, *secureMetrics, *metricsCertDir),
		HealthProbeBindAddress: probeAddr,
		PprofBindAddress:       *pprofAddr,
		Cache:                  agent.CacheOptions(nodeName),
		Client:                 agent.ClientOptions(), // every write under the agent's field manager
		NewClient:              cachewait.NewClient,   // its reads wait for its own writes, within a bound
	})
	if err != nil {
		log.Error(err, "Failed to create the agent's manager")
		os.Exit(1)
	}
	options := agent.Options{NodeName: nodeName, Health: health, IgnoredNamespaces: ignored,
		UDS: agent.UDSOptions{Enabled: *udsCSI, Root: *udsRoot}}
	if *endpointTimes {
		options.EndpointTimes = agent.NewEndpointTimes()
	}
	registry := agent.NewNetNS()
	netnsFile := ""
	if cniOpts.socket != "" {
		netnsFile = filepath.Join(filepath.Dir(cniOpts.socket), "netns.json")
		var dropped []string
		if registry, dropped, err = agent.OpenNetNS(netnsFile); err != nil {
			log.Error(err, "Failed to read the network namespace registry")
			os.Exit(1)
		}
		if len(dropped) > 0 {
			log.Info("Dropped the pods whose network namespace went while no agent ran", "pods", dropped)
		}
		listener, err := agent.ListenCNI(cniOpts.socket)
		if err != nil {
			log.Error(err, "Failed to listen for the CNI plugin", "socket", cniOpts.socket)
			os.Exit(1)
		}
		options.CNI = &agent.CNIOptions{Listener: listener, NetNS: registry, DrainTail: drainTailOption}
	}
	cniInstall, self, err := cniInstallOptions(cfg, scheme, cniOpts, ignored, log)
	if err != nil {
		fmt.Fprintf(os.Stderr, "agent: %v\n", err)
		os.Exit(2)
	}
	options.CNIInstall = cniInstall
	proxyConfig := servesProxyConfig(*proxyConfigOn, *xdsAddress, *secureMetrics, metricsAddr, log)
	if *xdsAddress != "" {
		if options.View, err = agent.NewView(cfg, scheme); err != nil {
			log.Error(err, "Failed to create the agent's view of the mesh")
			os.Exit(1)
		}
		listener, err := xdsserver.Listen(xdsAddr)
		if err != nil {
			log.Error(err, "Failed to listen for xDS", "address", xdsAddr.String())
			os.Exit(1)
		}
		accessLog := accesslog.New(accesslog.Options{NodeID: nodeName, Log: ctrl.Log.WithName("access-log"), Lines: *accessLogLines})
		serverOptions := xdsserver.Options{Listener: listener, NodeEnvoy: envoyCallers, Log: ctrl.Log.WithName("xds-server"), AccessLog: accessLog}
		if serverOptions.ProxylessListener, err = listenForPods(proxylessAddr); err != nil {
			log.Error(err, "Failed to listen for proxyless gRPC clients", "address", proxylessAddr.String())
			os.Exit(1)
		}
		options.XDS = &agent.XDSOptions{
			Server:     xdsserver.New(serverOptions),
			MeshDomain: meshDomain, Issuer: issuer, CaptureMode: mode, NetNS: registry, NetNSPathTemplate: netns,
			Capture: captureOpts, AccessLog: accessLog, Upstreams: upstreams, HopHTTP3: *hopHTTP3,
		}
		options.XDS.Identities = identities
		options.XDS.ProxyConfig = proxyConfig
		options.XDS.Demands = demandRecord(upstreams, cniOpts.socket, log)
	}
	if err := agent.Setup(mgr, options); err != nil {
		log.Error(err, "Failed to set up the agent")
		os.Exit(1)
	}
	utilruntime.Must(mgr.AddHealthzCheck("healthz", healthz.Ping))
	utilruntime.Must(mgr.AddReadyzCheck("readyz", healthz.Ping))

	announceIssuer(log, issuer)
	log.Info("Starting agent", "node", nodeName, "meshDomain", meshDomain, "identityIssuer", issuer.String(), "ignoredNamespaces", ignored.String(),
		"xdsAddress", *xdsAddress, "nodeEnvoy", envoyCallers.String(), "proxylessXDSAddress", *proxylessAddress, "upstreams", upstreams, "hopHTTP3", *hopHTTP3, "captureMode", mode, "captureResync", *captureResync, "netnsPathTemplate", *netnsTemplate,
		"netnsDrainTail", *drainTail,
		"proxyConfig", proxyConfig, "cniSocket", cniOpts.socket, "cniConfDir", cniOpts.confDir, "spireAdminSocket", *spireAdminSocket)
	err = mgr.Start(ctrl.SetupSignalHandler())
	if options.CNIInstall != nil {
		uninstallIfRemoved(cfg, scheme, self, options.CNIInstall.ReaderToken, cniOpts, ignored, registry, netnsFile, log)
	}
	if err != nil {
		log.Error(err, "Agent stopped")
		os.Exit(1)
	}
}

// runSubcommand runs the subcommand args name, if they name one, and returns its exit code.
func runSubcommand(args []string) (int, bool) {
	if len(args) == 0 {
		return 0, false
	}
	switch args[0] {
	case "install-cni", "uninstall-cni", "uninstall":
		return runCNISubcommand(args[0], args[1:], os.Stderr), true
	case "envoy-helper", "envoy-drain":
		return runEnvoySubcommand(args[0], args[1:], os.Stdout, os.Stderr), true
	case "install-seccomp":
		return runSeccompSubcommand(args[1:], os.Stdout, os.Stderr), true
	}
	return 0, false
}

// parseXDSAddresses parses --xds-address and --proxyless-xds-address; an empty flag is the zero
// Address. Proxyless clients are served from the cluster view, which only xDS serving starts.
func parseXDSAddresses(xdsAddress, proxylessAddress string) (xdsAddr, proxylessAddr xdsserver.Address, err error) {
	if xdsAddress != "" {
		if xdsAddr, err = xdsserver.ParseAddress(xdsAddress); err != nil {
			return xdsAddr, proxylessAddr, fmt.Errorf("--xds-address: %w", err)
		}
	}
	if proxylessAddress == "" {
		return xdsAddr, proxylessAddr, nil
	}
	if xdsAddress == "" {
		return xdsAddr, proxylessAddr, fmt.Errorf("--proxyless-xds-address %q needs --xds-address (the cluster view): set both, or neither", proxylessAddress)
	}
	if proxylessAddr, err = xdsserver.ParseAddress(proxylessAddress); err != nil {
		return xdsAddr, proxylessAddr, fmt.Errorf("--proxyless-xds-address: %w", err)
	}
	return xdsAddr, proxylessAddr, nil
}

// servesProxyConfig is whether the agent serves the pods' proxy configuration: asked for
// (--proxy-config), with xDS serving (there is no configuration to show without), on a metrics
// endpoint that authenticates and authorizes each request; when asked for and the endpoint does
// not, it says why it does not serve it.
func servesProxyConfig(on bool, xdsAddress string, secure bool, metricsAddr string, log logr.Logger) bool {
	if !on || xdsAddress == "" {
		return false
	}
	if !secure || metricsAddr == "0" {
		log.Info("Not serving the pods' proxy configuration: it is served on the metrics endpoint only when that authenticates and authorizes each request",
			"flag", "--"+proxyconfig.Flag, "--"+proxyconfig.MetricsSecureFlag, secure, "--"+proxyconfig.MetricsAddressFlag, metricsAddr)
		return false
	}
	return true
}

// parseModes parses --capture-mode and --identity-issuer.
func parseModes(captureMode, issuer string) (model.CaptureMode, workloadidentity.Issuer, error) {
	mode, err := model.ParseCaptureMode(captureMode)
	if err != nil {
		return "", "", fmt.Errorf("--capture-mode: %w", err)
	}
	parsed, err := workloadidentity.ParseIssuer(issuer)
	return mode, parsed, err
}

// announceIssuer says, at start, what running without an identity issuer means on this node.
func announceIssuer(log logr.Logger, issuer workloadidentity.Issuer) {
	if !issuer.Issues() {
		log.Info("Running without a workload-identity issuer: no raw-TCP cluster is built, and a captured TCP dial of a mesh VIP is closed",
			"flag", "--"+workloadidentity.IssuerFlag)
	}
}

// identitySource is the source of the node's pods' SVIDs on the SPIRE agent's admin socket, in
// the mesh domain's trust domain; nil without a socket (--spire-admin-socket empty).
func identitySource(socket, xdsAddress, meshDomain string, issuer workloadidentity.Issuer) (*svid.Source, error) {
	if socket == "" {
		return nil, nil
	}
	if !issuer.Issues() {
		return nil, fmt.Errorf("--spire-admin-socket %q with --%s=none: a mesh without an issuer fetches no SVIDs; drop one of them", socket, workloadidentity.IssuerFlag)
	}
	if xdsAddress == "" {
		return nil, fmt.Errorf("--spire-admin-socket %q needs --xds-address (the SVIDs are served over its SDS): set both, or neither", socket)
	}
	td, err := spiffeid.TrustDomainFromString(meshDomain)
	if err != nil {
		return nil, fmt.Errorf("with --spire-admin-socket, --mesh-domain is the SPIFFE trust domain, and %q is none (%v): use lower-case letters, digits, dots, dashes and underscores", meshDomain, err)
	}
	return svid.New(svid.Options{Socket: socket, TrustDomain: td, Log: ctrl.Log.WithName("identities")})
}

// listenForPods listens on the proxyless socket; nothing (a nil listener) when a is the zero
// Address (no --proxyless-xds-address).
func listenForPods(a xdsserver.Address) (net.Listener, error) {
	if a == (xdsserver.Address{}) {
		return nil, nil
	}
	return xdsserver.ListenForPods(a)
}

// cniInstallOptions keep the plugin installed when --cni-conf-dir is set (nil otherwise): its kubeconfig with a token
// of --cni-service-account, and the token of the agent's reader (agent.ReaderAccount) it reads with
// when it stops and its pod's token is refused; self is what it learnt of its own pod.
func cniInstallOptions(cfg *rest.Config, scheme *runtime.Scheme, f cniFlags, ignored registration.IgnoredNamespaces, log logr.Logger) (*agent.CNIInstallOptions, agent.Self, error) {
	if f.confDir == "" {
		return nil, agent.Self{}, nil
	}
	opts := &agent.CNIInstallOptions{Installer: f.installer(ignored), Kubeconfig: f.kubeconfig, RestConfig: cfg}
	reader, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, agent.Self{}, err
	}
	self, selfAccount := learnSelf(reader, log)
	if f.kubeconfig != "" {
		if opts.PluginToken, err = pluginToken(cfg, f.serviceAccount); err != nil {
			return nil, self, fmt.Errorf("--cni-kubeconfig: %w", err)
		}
	}
	if selfAccount != "" {
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return nil, self, err
		}
		opts.ReaderToken = &agent.ServiceAccountToken{Client: cs.CoreV1(), Namespace: self.Pod.Namespace, Name: agent.ReaderAccount(selfAccount), Lifetime: agent.ReaderTokenLifetime}
	}
	return opts, self, nil
}

// demandRecord is the record of what the node fetched on demand, with --upstreams=declared: kept
// in the CNI run directory beside the netns registry, so that a restarted agent's first build
// carries it and the node's Envoy keeps those clusters. Nil (the agent keeps one in memory)
// without a run directory or on-demand fetching. A record that does not parse stops the agent.
func demandRecord(upstreams model.UpstreamsMode, cniSocket string, log logr.Logger) *demand.Record {
	if !upstreams.OnDemand() || cniSocket == "" {
		return nil
	}
	rec, err := agent.OpenDemands(filepath.Join(filepath.Dir(cniSocket), agent.DemandsFile), log)
	if err != nil {
		log.Error(err, "Failed to read the on-demand record")
		os.Exit(1)
	}
	return rec
}

// hopProtocolFlag turns the HTTP/3 hop between node proxies on (agent.XDSOptions.HopHTTP3,
// model.Mesh.HopHTTP3).
const hopProtocolFlag = "hop-http3"

// checkHopHTTP3 refuses --hop-http3 without --xds-address: the hop is the node's Envoy's, which
// only an agent serving xDS configures.
func checkHopHTTP3(on bool, xdsAddress string) error {
	if on && xdsAddress == "" {
		return fmt.Errorf("--%s=true needs --xds-address (the hop is the node's Envoy's, which the agent configures over it): set --xds-address, or leave --%s off",
			hopProtocolFlag, hopProtocolFlag)
	}
	return nil
}
