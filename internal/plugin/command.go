// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package plugin

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/aether-mesh/aether-operator/internal/resolve"
)

// Exit statuses of kubectl aether.
const (
	// ExitFound is the status when the answer is a "no": check found a pod the webhook would deny,
	// dial was refused or answered 421/400.
	ExitFound = 1
	// ExitUsage is the status when the command could not answer: bad flags, unreadable input, no
	// cluster.
	ExitUsage = 2
)

// ExitError carries an exit status out of a command whose output is already written.
type ExitError struct {
	Code int
	Msg  string
}

func (e *ExitError) Error() string { return e.Msg }

// Output formats of -o.
const (
	OutputText = ""
	OutputJSON = "json"
	OutputYAML = "yaml"
)

// NewCommand is `kubectl aether` and its subcommands, writing to streams.
func NewCommand(streams genericiooptions.IOStreams) *cobra.Command {
	flags := genericclioptions.NewConfigFlags(true)
	root := &cobra.Command{
		Use: "kubectl-aether",
		// kubectl runs the plugin as `kubectl aether`: help and completion say so.
		Annotations: map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl aether"},
		Short:       "Explain and check the Aether mesh: what a dial reaches, and manifests before they are applied",
		Long: `kubectl aether answers from the same rules the mesh uses (internal/portspec for the pod
annotations, internal/resolve for what a spelling reaches), so the plugin, the controller and the
data plane cannot disagree.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	root.SetIn(streams.In)
	flags.AddFlags(root.PersistentFlags())
	root.AddCommand(newCheckCommand(streams), newDialCommand(streams, flags), newStatusCommand(streams, flags), newVersionCommand(streams, flags), newProxyConfigCommand(streams, flags))
	return root
}

// addOutputFlag adds -o json|yaml.
func addOutputFlag(cmd *cobra.Command, output *string) {
	cmd.Flags().StringVarP(output, "output", "o", OutputText, "Output format: json or yaml (default: text)")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{OutputJSON, OutputYAML}, cobra.ShellCompDirectiveNoFileComp))
}

// checkOutput refuses an -o value other than json or yaml.
func checkOutput(output string) error {
	switch output {
	case OutputText, OutputJSON, OutputYAML:
		return nil
	}
	return &ExitError{Code: ExitUsage, Msg: fmt.Sprintf("-o %q: unknown output format: want json or yaml, or no -o for text", output)}
}

// writeData writes v as JSON or YAML.
func writeData(w io.Writer, output string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if output == OutputYAML {
		if data, err = yaml.JSONToYAML(data); err != nil {
			return err
		}
	} else {
		data = append(data, '\n')
	}
	_, err = w.Write(data)
	return err
}

func newCheckCommand(streams genericiooptions.IOStreams) *cobra.Command {
	var files []string
	var output string
	var recursive bool
	cmd := &cobra.Command{
		Use:   "check -f <file|dir|->",
		Short: "Check pod templates in manifests as the admission webhook would, offline",
		Long: `Check reads manifests (multi-document YAML or JSON, v1 Lists, directories, or - for standard
input) and judges the pod template of every Pod, Deployment, StatefulSet, DaemonSet, ReplicaSet, Job
and CronJob labelled aether.io/managed: "true" exactly as the pod admission webhook does: each denial
with the webhook's words, and its warnings. No cluster is needed.

Exit status: 0 when every pod template would be admitted (warnings allowed), 1 when one would be
denied, 2 when the input cannot be read.`,
		Example: `  # Check a directory of manifests, and its subdirectories
  kubectl aether check -R -f deploy/

  # Check what kustomize renders, in CI or a pre-commit hook
  kustomize build overlays/prod | kubectl aether check -f -

  # Machine-readable findings
  kubectl aether check -f app.yaml -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			if len(files) == 0 {
				return &ExitError{Code: ExitUsage, Msg: "check needs -f <file|dir|->: the manifests to check (- reads standard input)"}
			}
			report, err := Check(files, recursive, streams.In)
			if err != nil {
				return &ExitError{Code: ExitUsage, Msg: err.Error()}
			}
			if output == OutputText {
				err = WriteCheck(streams.Out, report)
			} else {
				err = writeData(streams.Out, output, report)
			}
			if err != nil {
				return err
			}
			if n := report.Errors(); n > 0 {
				return &ExitError{Code: ExitFound, Msg: count(n, "pod template") + " would be denied by the admission webhook"}
			}
			return nil
		},
	}
	cmd.Flags().StringSliceVarP(&files, "filename", "f", nil, "Manifests to check: a file, a directory (searched for *.yaml, *.yml, *.json) or - for standard input; repeatable")
	cmd.Flags().BoolVarP(&recursive, "recursive", "R", false, "Check the directories named by -f recursively, as kubectl apply -R")
	addOutputFlag(cmd, &output)
	return cmd
}

// clientFor is a client of the cluster the kubeconfig flags name, and the namespace they name
// (--namespace, else the context's, else "default").
func clientFor(flags *genericclioptions.ConfigFlags) (client.Client, string, error) {
	namespace, _, err := flags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return nil, "", &ExitError{Code: ExitUsage, Msg: err.Error()}
	}
	config, err := flags.ToRESTConfig()
	if err != nil {
		return nil, "", &ExitError{Code: ExitUsage, Msg: err.Error()}
	}
	scheme, err := NewScheme()
	if err != nil {
		return nil, "", err
	}
	c, err := client.New(config, client.Options{Scheme: scheme})
	if err != nil {
		return nil, "", &ExitError{Code: ExitUsage, Msg: err.Error()}
	}
	return c, namespace, nil
}

func newDialCommand(streams genericiooptions.IOStreams, flags *genericclioptions.ConfigFlags) *cobra.Command {
	var output, hostHeader, meshDomain, from string
	cmd := &cobra.Command{
		Use:   "dial <spelling> [--host <name>:<port>] [--from <pod>]",
		Short: "Explain what a client spelling reaches: the port and protocol, or the refusal or 421 and why",
		Long: `Dial answers what a client gets for a spelling of a mesh service, from the resolution rule the
controller and the data plane use (internal/resolve): the port and protocol reached, or the refusal,
or the HTTP 421 with its x-aether-error and reason; then the endpoints behind that port (ready/total
by declared protocol, so a protocol conflict shows) and the routes that name it, with the mesh
controller's Accepted and ResolvedRefs.

A spelling is http://<name>[:<port>]/... (an HTTP request; its authority's port is the port),
https://<name>/ (TLS the application terminates, port 443), or <name>:<port> (a connection). <name> is
<svc>.<ns>.<mesh-domain>, <svc>.<ns>.svc.cluster.local, <svc>.<ns>, or <svc> in the current namespace.
--host asks about an HTTP request through the mesh's HTTP proxy port 18081 with that Host header.

--from <pod> asks from one pod: whether it is in the mesh, the identity its connections present, its
capture mode (its annotation aether.io/capture-mode, else the --capture-mode of the agent on its node)
and what its own capture table, built as that agent builds it, does with the connection: redirect it
to the node's proxy, where the answer above applies, or let it leave the pod directly (a port scoped
capture does not take, an excluded port), where it does not.

With a port reached, it names the AccessPolicies that govern the port (none: open to every mesh
identity) and, with --from, whether they admit the pod's identity (an HTTP request as GET of the
URL's path), by which rule.

Exit status: 0 when a port is reached (or the proxy port is dialled without --host), 1 for a refusal,
a 421 or a 400, a --from pod whose connection does not reach the mesh, or one its AccessPolicies
deny, 2 when it could not answer.`,
		Example: `  # What does a portless HTTP URL reach?
  kubectl aether dial http://payments.shop.aether.internal/

  # A connection to a port, by its Kubernetes name
  kubectl aether dial payments.shop.svc.cluster.local:9000

  # A request through the proxy port, Host header payments.shop:8080
  kubectl aether dial --host payments.shop:8080

  # A name in the current namespace, as JSON for a script
  kubectl aether dial payments:8080 -n shop -o json

  # The same connection from one pod: does its capture take it to the mesh?
  kubectl aether dial payments.shop:9000 --from shop/checkout-7d9f`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			arg := ""
			if len(args) == 1 {
				arg = args[0]
			}
			spelling, err := ParseSpelling(arg, hostHeader)
			if err != nil {
				return &ExitError{Code: ExitUsage, Msg: err.Error()}
			}
			c, namespace, err := clientFor(flags)
			if err != nil {
				return err
			}
			report, err := Dial(cmd.Context(), c, spelling, namespace, meshDomain, from)
			if err != nil {
				return err
			}
			if output == OutputText {
				err = WriteDial(streams.Out, report)
			} else {
				err = writeData(streams.Out, output, report)
			}
			if err != nil {
				return err
			}
			if f := report.From; f != nil && !f.ReachesProxy {
				return &ExitError{Code: ExitFound, Msg: fmt.Sprintf("from pod %s, %s does not reach the mesh: %s", f.Pod, spelling.Written, f.Why)}
			}
			if a := report.Access; a != nil && a.Admitted != nil && !*a.Admitted {
				return &ExitError{Code: ExitFound, Msg: fmt.Sprintf("%s from %s is denied by the AccessPolicies of port %d of %s/%s (%s)",
					spelling.Written, a.Caller, report.Answer.Port, report.Service.Namespace, report.Service.Name, strings.Join(a.Policies, ", "))}
			}
			if report.Refused() {
				return &ExitError{Code: ExitFound, Msg: fmt.Sprintf("%s does not reach %s/%s: %s",
					spelling.Written, report.Service.Namespace, report.Service.Name, report.Answer.Outcome)}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&hostHeader, "host", "", "The Host header of an HTTP request through the mesh's HTTP proxy port 18081, as <name>[:<port>]")
	cmd.Flags().StringVar(&meshDomain, "mesh-domain", resolve.DefaultMeshDomain, "The mesh's DNS domain (the manager's --mesh-domain)")
	cmd.Flags().StringVar(&from, "from", "", "Answer from this pod (<name> in the namespace, or <namespace>/<name>): its capture mode, identity and what its own table does with the connection")
	addOutputFlag(cmd, &output)
	return cmd
}

func newStatusCommand(streams genericiooptions.IOStreams, flags *genericclioptions.ConfigFlags) *cobra.Command {
	var output string
	var allNamespaces bool
	cmd := &cobra.Command{
		Use:   "status [<service>]",
		Short: "Show every mesh service's ports, their endpoints and conditions, and the routes parented to it",
		Long: `Status shows, for every MeshService in the namespace (all namespaces with -A) or the one named,
a row per port: its protocol, its endpoints ready/total by the protocol they declare it in (more than
one while a rollout retypes the port), and the port's Ready and ProtocolConsistent conditions; then
every route (HTTPRoute, GRPCRoute, TCPRoute, TLSRoute) parented to a service, with the mesh
controller's Accepted and ResolvedRefs. Colour only on a terminal.`,
		Example: `  # Every service in the current namespace
  kubectl aether status

  # One service
  kubectl aether status payments -n shop

  # Every namespace, as YAML
  kubectl aether status -A -o yaml`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			c, namespace, err := clientFor(flags)
			if err != nil {
				return err
			}
			service := ""
			if len(args) == 1 {
				service = args[0]
			} else if allNamespaces {
				namespace = ""
			}
			statuses, err := Status(cmd.Context(), c, namespace, service)
			if err != nil {
				return err
			}
			if output != OutputText {
				return writeData(streams.Out, output, statuses)
			}
			return WriteStatus(streams.Out, statuses, isTerminal(streams.Out))
		},
	}
	cmd.Flags().BoolVarP(&allNamespaces, "all-namespaces", "A", false, "Show the services of every namespace")
	addOutputFlag(cmd, &output)
	return cmd
}

// isTerminal is whether w is a terminal (colour is for people, not pipes and files).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

func newProxyConfigCommand(streams genericiooptions.IOStreams, flags *genericclioptions.ConfigFlags) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "proxy-config <pod>",
		Short: "Show what the node's proxy serves for a pod: its listeners, routes and clusters, read from its node's agent",
		Long: `Proxy-config reads, from the agent of the pod's node, the part of the node's published proxy
configuration that the pod's proxy uses: its capture, proxy and inbound listeners with their filter
chains (what each matches and where it sends), the route configurations those listeners name (virtual
hosts and domains), and the clusters they send to (type, endpoint count, the SNI of their mTLS). It is
what the agent serves the node's Envoy now, not a recomputation; secrets are never shown.

The agent serves it on its metrics port, over HTTPS, to whom the API server vouches for and allows
get on /proxy-config/<namespace>/<pod> (the ClusterRole proxy-config-reader grants it for every
namespace). proxy-config reaches it through a port-forward to the agent's pod, which the API server
authorizes, and sends your kubeconfig's credentials (a client certificate, or a bearer token), which
the agent has the API server check: you need create on pods/portforward in the agent's namespace,
get on that path, and get and list on pods (to find the pod and its node's agent).

-o json or -o yaml prints the resources themselves, in Envoy's JSON (protojson).

Exit status: 0 when the configuration is shown, 1 when the pod is not in the mesh or its agent renders
nothing for it, 2 when it could not be read (no such pod, no ready agent, not allowed).`,
		Example: `  # What the node's proxy serves for pod checkout-7d9f in namespace shop
  kubectl aether proxy-config checkout-7d9f -n shop

  # The same, as Envoy's own JSON
  kubectl aether proxy-config shop/checkout-7d9f -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			c, namespace, err := clientFor(flags)
			if err != nil {
				return err
			}
			config, err := flags.ToRESTConfig()
			if err != nil {
				return &ExitError{Code: ExitUsage, Msg: err.Error()}
			}
			name := args[0]
			if ns, n, ok := strings.Cut(name, "/"); ok {
				namespace, name = ns, n
			}
			report, err := ProxyConfig(cmd.Context(), c, namespace, name, PortForwardGet(config))
			if err != nil {
				return err
			}
			if output == OutputText {
				return WriteProxyConfig(streams.Out, report)
			}
			return writeData(streams.Out, output, report.Config)
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
}
