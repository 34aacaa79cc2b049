// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package docscheck

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// installScript holds the documented install paths, the commands the cluster tier runs.
const installScript = "hack/install/install.sh"

// installPage is the page that must quote every install path.
const installPage = "docs/install.md"

// installCommands reads the install paths of hack/install/install.sh (its PATHS table: a name,
// then the command): command → name.
func installCommands(root string) (map[string]string, error) {
	b, err := os.ReadFile(filepath.Join(root, installScript))
	if err != nil {
		return nil, err
	}
	_, rest, found := strings.Cut(string(b), "\nPATHS='\n")
	table, _, closed := strings.Cut(rest, "\n'\n")
	if !found || !closed {
		return nil, fmt.Errorf("%s: no PATHS='…' table of install paths", installScript)
	}
	cmds := map[string]string{}
	for line := range strings.SplitSeq(table, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		cmds[strings.Join(f[1:], " ")] = f[0]
	}
	if len(cmds) == 0 {
		return nil, fmt.Errorf("%s: the PATHS table is empty", installScript)
	}
	return cmds, nil
}

// installCommand returns the install command text holds (a code line without its comment, or a
// code span), normalised to single spaces, and whether it is one: `helm install` or
// `kubectl apply -k` with arguments. A bare `kubectl apply -k` names no path.
func installCommand(text string) (string, bool) {
	if before, _, ok := strings.Cut(text, " #"); ok {
		text = before
	}
	cmd := strings.Join(strings.Fields(text), " ")
	for _, prefix := range []string{"helm install ", "kubectl apply -k "} {
		if strings.HasPrefix(cmd, prefix) {
			return cmd, true
		}
	}
	return "", false
}

// checkInstall reports an install command the docs give that is not one of the install paths,
// which the cluster tier runs, and records the paths' commands it quoted.
func (c *checker) checkInstall(rel string, line int, text string, report func(int, string, ...any)) {
	cmd, ok := installCommand(text)
	if !ok {
		return
	}
	name, known := c.installs[cmd]
	if !known {
		report(line, "install command %q is not one of the install paths of %s, the commands the cluster tier runs: quote one of them, or add the path there", cmd, installScript)
		return
	}
	if rel == installPage {
		c.quoted[name] = true
	}
}

// unquotedInstalls reports each install path the install page does not quote.
func (c *checker) unquotedInstalls() []Problem {
	var out []Problem
	for _, cmd := range slices.Sorted(maps.Keys(c.installs)) {
		if name := c.installs[cmd]; !c.quoted[name] {
			out = append(out, Problem{File: installPage, Line: 1, Msg: fmt.Sprintf("the install path %s of %s (%q) is not quoted here: the page must give every command the cluster tier runs", name, installScript, cmd)})
		}
	}
	return out
}
