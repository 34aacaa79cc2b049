// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package plugin

import (
	"strings"
	"testing"

	"github.com/aether-mesh/aether-operator/internal/version"
)

// TestHelpAndCompletion: each command's --help shows it as `kubectl aether` with its examples and
// the kubeconfig flags, and cobra's completion command writes a script for each shell.
func TestHelpAndCompletion(t *testing.T) {
	for _, c := range []struct {
		command string
		want    []string
	}{
		{"check", []string{"kubectl aether check -f <file|dir|->", "kustomize build overlays/prod | kubectl aether check -f -", "Exit status"}},
		{"dial", []string{"kubectl aether dial <spelling>", "kubectl aether dial --host payments.shop:8080", "--mesh-domain", "--kubeconfig", "--context"}},
		{"status", []string{"kubectl aether status [<service>]", "kubectl aether status -A -o yaml", "--all-namespaces", "--namespace"}},
	} {
		out, code := run(t, "", c.command, "--help")
		if code != 0 {
			t.Errorf("%s --help: exit status %d", c.command, code)
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("%s --help lacks %q:\n%s", c.command, w, out)
			}
		}
	}
	for shell, want := range map[string]string{"bash": "bash completion", "zsh": "#compdef", "fish": "complete -c", "powershell": "Register-ArgumentCompleter"} {
		out, code := run(t, "", "completion", shell)
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("completion %s: exit status %d, want a script with %q; got %.200s", shell, code, want, out)
		}
	}
	if out, code := run(t, "", "__complete", "dial", "x", "-o", ""); code != 0 || !strings.Contains(out, "json\nyaml\n") {
		t.Errorf("completing -o: exit status %d, got %q", code, out)
	}
}

// TestVersion: `kubectl aether version --client` prints the plugin's build, as text and as data,
// without a cluster.
func TestVersion(t *testing.T) {
	info := version.Get()
	out, code := run(t, "", "version", "--client")
	if want := "kubectl-aether " + info.String() + "\n"; code != 0 || out != want {
		t.Errorf("version --client: exit status %d, got %q, want %q", code, out, want)
	}
	out, code = run(t, "", "version", "--client", "-o", "json")
	if code != 0 || !strings.Contains(out, `"goVersion": "`+info.GoVersion+`"`) || strings.Contains(out, `"server"`) {
		t.Errorf("version --client -o json: exit status %d, got %q", code, out)
	}
	if _, code = run(t, "", "version", "-o", "xml"); code != ExitUsage {
		t.Errorf("version -o xml: exit status %d, want %d", code, ExitUsage)
	}
}

// TestVersionServer: without --client, version also reads the cluster: each component's images,
// with their pods and how many are ready (the fixture: a ready manager pod, the agents on two
// images, no proxy).
func TestVersionServer(t *testing.T) {
	info := version.Get()
	out, code := run(t, "", append([]string{"version"}, kubeconfig()...)...)
	want := "kubectl-aether " + info.String() + "\n" +
		"manager  " + fixtureImage + ": 1 pod, 1 ready\n" +
		"agent    " + fixtureOldImage + ": 1 pod, 0 ready\n" +
		"agent    " + fixtureImage + ": 1 pod, 0 ready\n" +
		"agent    2 images in use: an upgrade in progress, or pods left behind\n" +
		"proxy    no pods found\n"
	if code != 0 || out != want {
		t.Errorf("version: exit status %d, got\n%s\nwant\n%s", code, out, want)
	}
	out, code = run(t, "", append([]string{"version", "-o", "json"}, kubeconfig()...)...)
	if code != 0 || !strings.Contains(out, `"component": "manager"`) || !strings.Contains(out, `"image": "`+fixtureImage+`"`) {
		t.Errorf("version -o json: exit status %d, got %q", code, out)
	}
}
