// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package plugin

import (
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/aether-mesh/aether-operator/internal/version"
)

// newVersionCommand is `kubectl aether version`: the plugin's own build. The plugin's answers
// come from the rules compiled into it, so a bug report needs this line beside the operator's
// (each of the operator's binaries prints its own with --version).
func newVersionCommand(streams genericiooptions.IOStreams) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the plugin's version, commit and Go version",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			info := version.Get()
			if output == OutputText {
				_, err := fmt.Fprintln(streams.Out, "kubectl-aether "+info.String())
				return err
			}
			return writeData(streams.Out, output, info)
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
}
