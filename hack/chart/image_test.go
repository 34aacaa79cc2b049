// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// images are the images of every container of objs, by "<kind>/<name>/<container>".
func images(objs []obj) map[string]string {
	out := map[string]string{}
	for _, o := range objs {
		for _, c := range containers(o) {
			out[o["kind"].(string)+"/"+field(o, "metadata", "name")+"/"+c["name"].(string)] = c["image"].(string)
		}
	}
	return out
}

// operatorImage matches the operator's own image in any spelling the values make.
var operatorImage = regexp.MustCompile(`/aether/operator[:@]`)

// TestImageValues: global.imageRegistry replaces every image's registry (the operator's, Envoy's,
// SPIRE's) and --identity-image follows the manager's image; a digest pins an image by content
// (the tag then ignored) and a malformed one fails naming the fix; imagePullSecrets reach every
// pod; none of it set, no pod has pull secrets.
func TestImageValues(t *testing.T) {
	objs := render(t, "--set", "global.imageRegistry=registry.invalid/mirror/")
	for where, image := range images(objs) {
		if !strings.HasPrefix(image, "registry.invalid/mirror/") || strings.Contains(image, "docker.io") {
			t.Errorf("%s: image %s, want it under registry.invalid/mirror/", where, image)
		}
	}
	manager := container(t, objs, "Deployment", "manager")
	if got := flagValue(manager, "--identity-image"); got != manager["image"] || got != "registry.invalid/mirror/aether/operator:dev" {
		t.Errorf("--identity-image %q, manager image %q: want both registry.invalid/mirror/aether/operator:dev", got, manager["image"])
	}

	const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	objs = render(t, "--set", "manager.image.digest="+digest, "--set", "manager.image.tag=ignored")
	manager = container(t, objs, "Deployment", "manager")
	want := "docker.io/aether/operator@" + digest
	if manager["image"] != want || flagValue(manager, "--identity-image") != want {
		t.Errorf("manager image %q, --identity-image %q: want both %s", manager["image"], flagValue(manager, "--identity-image"), want)
	}
	if agent := container(t, objs, "DaemonSet", "agent"); agent["image"] != "docker.io/aether/operator:dev" {
		t.Errorf("the agent's image %q changed with the manager's digest", agent["image"])
	}
	if _, err := helmTemplate("--set", "agent.image.digest=sha256:xyz"); err == nil ||
		!strings.Contains(err.Error(), `image docker.io/aether/operator: digest "sha256:xyz" is not sha256:<64 hex digits>`) {
		t.Errorf("a malformed digest: %v, want the digest named", err)
	}

	pods := 0
	for _, o := range render(t, "--set", "imagePullSecrets[0].name=regcred") {
		if len(containers(o)) == 0 {
			continue
		}
		pods++
		secrets, _ := get(o, "spec", "template", "spec", "imagePullSecrets").([]any)
		if len(secrets) != 1 || secrets[0].(obj)["name"] != "regcred" {
			t.Errorf("%s %s: imagePullSecrets %v, want [{name: regcred}]", o["kind"], field(o, "metadata", "name"), secrets)
		}
	}
	if pods < 5 {
		t.Errorf("imagePullSecrets checked on %d workloads, want the manager, agent, Envoy and SPIRE's two", pods)
	}
	for _, o := range render(t) {
		if s := get(o, "spec", "template", "spec", "imagePullSecrets"); s != nil {
			t.Errorf("%s %s has imagePullSecrets %v by default", o["kind"], field(o, "metadata", "name"), s)
		}
	}
}

// TestOperatorImagesFollowAppVersion: the operator's own images (manager, agent and install-cni,
// envoy-helper, the SPIRE registrar) take the chart's appVersion as their tag when theirs is
// empty, as in values.yaml; Envoy's and SPIRE's keep their own tags.
func TestOperatorImagesFollowAppVersion(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "chart")
	if err := os.CopyFS(dir, os.DirFS(chart)); err != nil {
		t.Fatal(err)
	}
	meta := filepath.Join(dir, "Chart.yaml")
	b, err := os.ReadFile(meta)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(b), `appVersion: "dev"`, `appVersion: "v9.9.9"`, 1)
	if text == string(b) {
		t.Fatal(`Chart.yaml has no appVersion: "dev" to change`)
	}
	if err := os.WriteFile(meta, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(helm, "template", release, dir, "--namespace", namespace).CombinedOutput()
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, out)
	}
	operator := 0
	for where, image := range images(decodeObjects(t, out)) {
		switch {
		case operatorImage.MatchString(image):
			operator++
			if image != "docker.io/aether/operator:v9.9.9" {
				t.Errorf("%s: %s, want the appVersion's tag v9.9.9", where, image)
			}
		case strings.HasSuffix(image, ":v9.9.9"):
			t.Errorf("%s: %s follows the operator's appVersion, which is not its release", where, image)
		}
	}
	if operator < 5 {
		t.Errorf("%d operator containers, want the manager, agent, install-cni, envoy-helper and the registrar", operator)
	}
}

// TestUDSCSIValue: the csi.aether.io node plugin (config/csi: its CSIDriver and DaemonSet) renders
// by default and without the node's Envoy; udsCsi.enabled=false turns the agents' socket delivery
// off (--uds-csi=false) and keeps the plugin for the identity gate's socket volume; with the gate
// off too, or without SPIRE, the plugin's two objects go and nothing else.
func TestUDSCSIValue(t *testing.T) {
	has := func(objs []obj) (driver, plugin bool) {
		for _, o := range objs {
			driver = driver || (o["kind"] == "CSIDriver" && field(o, "metadata", "name") == "csi.aether.io")
			plugin = plugin || (o["kind"] == "DaemonSet" && strings.HasSuffix(field(o, "metadata", "name"), "-csi-node"))
		}
		return driver, plugin
	}
	all := render(t)
	for _, args := range [][]string{nil, {"--set", "envoy.enabled=false"}} {
		if d, p := has(render(t, args...)); !d || !p {
			t.Errorf("%v: CSIDriver %v, plugin DaemonSet %v; want both", args, d, p)
		}
	}
	gateOnly := render(t, "--set", "udsCsi.enabled=false")
	if d, p := has(gateOnly); !d || !p {
		t.Errorf("udsCsi.enabled=false, the gate on: CSIDriver %v, plugin DaemonSet %v; want both, for the gate", d, p)
	}
	if got := flagValue(container(t, gateOnly, "DaemonSet", "agent"), "--uds-csi"); got != "false" {
		t.Errorf("udsCsi.enabled=false: the agent's --uds-csi=%q, want false", got)
	}
	if got := flagValue(container(t, all, "DaemonSet", "agent"), "--uds-csi"); got != "true" {
		t.Errorf("by default the agent's --uds-csi=%q, want true", got)
	}
	off := render(t, "--set", "udsCsi.enabled=false", "--set", "identityGate.enabled=false")
	if d, p := has(off); d || p {
		t.Errorf("udsCsi.enabled=false, identityGate.enabled=false: CSIDriver %v, plugin DaemonSet %v; want neither", d, p)
	}
	if len(off) != len(all)-2 {
		t.Errorf("udsCsi.enabled=false, identityGate.enabled=false renders %d objects, want the default's %d less the plugin's two", len(off), len(all))
	}
	if d, p := has(render(t, "--set", "udsCsi.enabled=false", "--set", "spire.enabled=false")); d || p {
		t.Errorf("udsCsi.enabled=false without SPIRE (no gate): CSIDriver %v, plugin DaemonSet %v; want neither", d, p)
	}
	for set, want := range map[string]string{"": "true", "identityGate.enabled=false": "false"} {
		args := []string{}
		if set != "" {
			args = []string{"--set", set}
		}
		if got := flagValue(container(t, render(t, args...), "Deployment", "manager"), "--identity-gate"); got != want {
			t.Errorf("%q: the manager's --identity-gate=%q, want %s", set, got, want)
		}
	}
	if c := container(t, all, "DaemonSet", "csi-node"); c["image"] != "docker.io/aether/operator:dev" {
		t.Errorf("the plugin runs %v, want the operator's image", c["image"])
	}
}

// TestMonitorsSelectTheirRelease: two releases in one namespace, each with its ServiceMonitors:
// each monitor selects its own release's metrics Service and not the other's.
func TestMonitorsSelectTheirRelease(t *testing.T) {
	services := map[string][]obj{}
	monitors := map[string][]obj{}
	for _, name := range []string{"mesh-a", "mesh-b"} {
		out, err := helmTemplateAs(name, namespace, "--set", "prometheus.serviceMonitor.enabled=true")
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range decodeObjects(t, out) {
			switch o["kind"] {
			case "Service":
				services[name] = append(services[name], o)
			case "ServiceMonitor":
				monitors[name] = append(monitors[name], o)
			}
		}
	}
	selects := func(m, svc obj) bool {
		labels, _ := get(svc, "metadata", "labels").(obj)
		for k, v := range get(m, "spec", "selector", "matchLabels").(obj) {
			if labels[k] != v {
				return false
			}
		}
		return true
	}
	for name, ms := range monitors {
		if len(ms) < 2 {
			t.Fatalf("release %s has %d ServiceMonitors, want the manager's and the agents'", name, len(ms))
		}
		for _, m := range ms {
			own := 0
			for release, svcs := range services {
				for _, svc := range svcs {
					if !selects(m, svc) {
						continue
					}
					if release != name {
						t.Errorf("%s's %s selects release %s's Service %s", name, field(m, "metadata", "name"), release, field(svc, "metadata", "name"))
					} else {
						own++
					}
				}
			}
			if own != 1 {
				t.Errorf("%s's %s selects %d of its own Services, want 1", name, field(m, "metadata", "name"), own)
			}
		}
	}
}

// TestMonitoredServicesSelectTheirRelease: two releases in one namespace, each with the headless
// Services its ServiceMonitors scrape (the agents' and the node proxies'): each selects its own
// release's pods (the DaemonSet's pod template) and not the other's. Without the release in the
// selector both would select both (the negative control: the Service with that label dropped
// selects the other release's pods).
func TestMonitoredServicesSelectTheirRelease(t *testing.T) {
	templates := map[string][]obj{}
	monitors := map[string][]obj{}
	for _, name := range []string{"mesh-a", "mesh-b"} {
		out, err := helmTemplateAs(name, namespace, "--set", "prometheus.serviceMonitor.enabled=true")
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range decodeObjects(t, out) {
			switch o["kind"] {
			case "DaemonSet", "Deployment", "StatefulSet":
				templates[name] = append(templates[name], o)
			case "Service":
				if get(o, "spec", "clusterIP") == "None" { // the monitored ones: headless
					monitors[name] = append(monitors[name], o)
				}
			}
		}
	}
	selects := func(selector obj, workload obj) bool {
		labels, _ := get(workload, "spec", "template", "metadata", "labels").(obj)
		for k, v := range selector {
			if labels[k] != v {
				return false
			}
		}
		return true
	}
	for name, ms := range monitors {
		if len(ms) == 0 {
			t.Fatalf("release %s has no monitored Service", name)
		}
		for _, m := range ms {
			selector := get(m, "spec", "selector").(obj)
			own, others := 0, 0
			for release, workloads := range templates {
				for _, w := range workloads {
					if !selects(selector, w) {
						continue
					}
					if release != name {
						t.Errorf("%s's %s selects release %s's pods of %s", name, field(m, "metadata", "name"), release, field(w, "metadata", "name"))
					} else {
						own++
					}
				}
			}
			if own != 1 {
				t.Errorf("%s's %s selects the pods of %d of its own workloads, want 1", name, field(m, "metadata", "name"), own)
			}
			unnarrowed := deepCopy(selector).(obj)
			delete(unnarrowed, "app.kubernetes.io/instance")
			for release, workloads := range templates {
				for _, w := range workloads {
					if release != name && selects(unnarrowed, w) {
						others++
					}
				}
			}
			if others == 0 {
				t.Errorf("%s's %s without the release label selects no other release's pods: the test cannot tell", name, field(m, "metadata", "name"))
			}
		}
	}
}
