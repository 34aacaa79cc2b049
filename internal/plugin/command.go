// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package plugin

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/yaml"
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
		Use:   "kubectl-aether",
		Short: "Explain and check the Aether mesh: what a dial reaches, and manifests before they are applied",
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
	root.AddCommand(newCheckCommand(streams))
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
