// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The chart's three workloads, by kind and name suffix, and the container each one's flags go to.
var workloads = []struct{ value, kind, suffix, container string }{
	{"manager", "Deployment", "-controller-manager", "manager"},
	{"agent", "DaemonSet", "-agent", "agent"},
	{"envoy", "DaemonSet", "-envoy", "envoy"},
}

// workload is the object of kind in the release's namespace whose name ends with suffix.
func workload(t *testing.T, objs []obj, kind, suffix string) obj {
	t.Helper()
	for _, o := range objs {
		if o["kind"] == kind && field(o, "metadata", "namespace") == namespace && strings.HasSuffix(field(o, "metadata", "name"), suffix) {
			return o
		}
	}
	t.Fatalf("no %s *%s in namespace %s", kind, suffix, namespace)
	return nil
}

// envoyExecLine is the line of the node Envoy's script that runs Envoy.
func envoyExecLine(t *testing.T, objs []obj) string {
	t.Helper()
	for _, c := range containers(workload(t, objs, "DaemonSet", "-envoy")) {
		if c["name"] != "envoy" {
			continue
		}
		for _, a := range args(c) {
			for l := range strings.SplitSeq(a, "\n") {
				if strings.HasPrefix(l, "exec envoy ") {
					return l
				}
			}
		}
	}
	t.Fatal("the node Envoy's container has no line exec envoy")
	return ""
}

// TestWorkloadValues: each workload's placement, pod metadata, log level and extra arguments
// land where they say when set, and leave config/'s fields (or none) when unset.
func TestWorkloadValues(t *testing.T) {
	type check struct {
		name  string
		args  []string
		got   func(t *testing.T, objs []obj) any
		want  any // with args
		unset any // with the defaults
	}
	var checks []check
	for _, w := range workloads {
		pod := func(path ...string) func(t *testing.T, objs []obj) any {
			return func(t *testing.T, objs []obj) any {
				return get(workload(t, objs, w.kind, w.suffix), append([]string{"spec", "template"}, path...)...)
			}
		}
		// config/'s own, which the values keep when unset.
		tolerations := any([]any{obj{"operator": "Exists"}})
		affinity := any(nil)
		annotations := any(nil)
		labels := map[string]any{"manager": obj{"control-plane": "controller-manager", "app.kubernetes.io/name": "aether-operator"},
			"agent": obj{"app.kubernetes.io/name": "aether-agent"}, "envoy": obj{"app.kubernetes.io/name": "aether-envoy"}}[w.value]
		if w.value == "manager" {
			tolerations = nil
			affinity = pod("spec", "affinity")(t, render(t))
			if affinity == nil {
				t.Fatal("config/manager's Deployment has no affinity: the test expects its anti-affinity")
			}
			annotations = obj{"kubectl.kubernetes.io/default-container": "manager"}
		}
		merged := func(base any, add obj) any {
			m := obj{}
			if base != nil {
				maps.Copy(m, base.(obj))
			}
			maps.Copy(m, add)
			return m
		}
		checks = append(checks,
			check{w.value + ".nodeSelector", sets(w.value + ".nodeSelector.disk=ssd"), pod("spec", "nodeSelector"),
				obj{"disk": "ssd"}, nil},
			check{w.value + ".tolerations", sets(w.value+".tolerations[0].key=dedicated", w.value+".tolerations[0].operator=Exists"),
				pod("spec", "tolerations"), []any{obj{"key": "dedicated", "operator": "Exists"}}, tolerations},
			check{w.value + ".affinity", []string{"--set-json", w.value + `.affinity={"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"pool","operator":"In","values":["mesh"]}]}]}}}`},
				pod("spec", "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms"),
				[]any{obj{"matchExpressions": []any{obj{"key": "pool", "operator": "In", "values": []any{"mesh"}}}}}, nil},
			check{w.value + ".podAnnotations", []string{"--set-string", w.value + `.podAnnotations.example\.org/scrape=true`},
				pod("metadata", "annotations"), merged(annotations, obj{"example.org/scrape": "true"}), annotations},
			// The pods carry config/'s labels and the release's (for the monitored Services).
			check{w.value + ".podLabels", sets(w.value + ".podLabels.team=mesh"),
				pod("metadata", "labels"), merged(labels, obj{"team": "mesh", "app.kubernetes.io/instance": release}),
				merged(labels, obj{"app.kubernetes.io/instance": release})},
			check{w.value + ".podLabels: not the selector", sets(w.value + ".podLabels.team=mesh"),
				func(t *testing.T, objs []obj) any {
					return get(workload(t, objs, w.kind, w.suffix), "spec", "selector", "matchLabels")
				}, labels, labels},
		)
		if w.value == "manager" {
			// Helm merges a map value into the default's: null drops a default's key.
			checks = append(checks, check{"manager.affinity without config/'s", []string{"--set-json", `manager.affinity={"nodeAffinity":{},"podAntiAffinity":null}`},
				pod("spec", "affinity"), obj{"nodeAffinity": obj{}}, affinity})
		}
		if w.value == "envoy" {
			checks = append(checks,
				check{"envoy.logLevel", sets("envoy.logLevel=debug"), func(t *testing.T, objs []obj) any { return envoyExecLine(t, objs) },
					"exec envoy -c /var/run/aether/proxy/bootstrap.yaml --disable-hot-restart --drain-time-s 20 --drain-strategy gradual --log-level debug",
					"exec envoy -c /var/run/aether/proxy/bootstrap.yaml --disable-hot-restart --drain-time-s 20 --drain-strategy gradual"})
			continue
		}
		lastArgs := func(t *testing.T, objs []obj) any {
			a := args(container(t, objs, w.kind, w.container))
			return a[len(a)-2:]
		}
		flag := func(t *testing.T, objs []obj) any {
			return flagValue(container(t, objs, w.kind, w.container), "--zap-log-level")
		}
		defaultLast := lastArgs(t, render(t))
		checks = append(checks,
			check{w.value + ".logLevel", sets(w.value + ".logLevel=debug"), flag, "debug", "<unset>"},
			check{w.value + ".logLevel: a number", sets(w.value + ".logLevel=3"), flag, "3", "<unset>"},
			// Last, after every flag the chart sets: a flag given again here wins.
			check{w.value + ".extraArgs", sets(w.value + ".extraArgs={--kube-api-qps=50,--identity-issuer=none}"), lastArgs,
				[]string{"--kube-api-qps=50", "--identity-issuer=none"}, defaultLast},
		)
	}
	defaults := render(t)
	defaultIDs := ids(defaults)
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			objs := render(t, c.args...)
			if got := c.got(t, objs); !cmp.Equal(got, c.want) {
				t.Errorf("%v: got %v, want %v", c.args, got, c.want)
			}
			if got := c.got(t, defaults); !cmp.Equal(got, c.unset) {
				t.Errorf("unset: got %v, want %v", got, c.unset)
			}
			if d := cmp.Diff(defaultIDs, ids(objs)); d != "" {
				t.Errorf("%v changed the set of objects:\n%s", c.args, d)
			}
		})
	}
}

// TestEnvoyExtraArgsAreShellWords: envoy.extraArgs reach Envoy as the words they are, spaces and
// quotes included: the script's exec line, with Envoy replaced by printf, run by sh, prints
// each of Envoy's arguments on a line.
func TestEnvoyExtraArgsAreShellWords(t *testing.T) {
	extra := []string{"--concurrency", "2", "a b", "it's", "$HOME", "`id`"}
	objs := render(t, "--set-json", `envoy.extraArgs=["--concurrency","2","a b","it's","$HOME","`+"`id`"+`"]`, "--set", "envoy.logLevel=warning")
	line := envoyExecLine(t, objs)
	out, err := exec.Command("/bin/sh", "-c", strings.Replace(line, "exec envoy ", `printf '%s\n' `, 1)).Output()
	if err != nil {
		t.Fatalf("sh -c %q: %v", line, err)
	}
	want := append([]string{"-c", "/var/run/aether/proxy/bootstrap.yaml", "--disable-hot-restart", "--drain-time-s", "20",
		"--drain-strategy", "gradual", "--log-level", "warning"}, extra...)
	if got := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n"); !slices.Equal(got, want) {
		t.Errorf("Envoy's arguments from %q:\n got %q\nwant %q", line, got, want)
	}
}

// TestBadLogLevels: a log level the binary would refuse fails helm template, naming the value.
func TestBadLogLevels(t *testing.T) {
	for _, c := range []struct{ set, want string }{
		{"manager.logLevel=verbose", `manager.logLevel: "verbose" is not a log level; set one of debug, info, error, panic, a number above 0`},
		{"agent.logLevel=-1", `agent.logLevel: "-1" is not a log level`},
		{"envoy.logLevel=loud", `envoy.logLevel: "loud" is not one of Envoy's log levels; set one of trace, debug, info, warning, warn, error, critical, off`},
		{"envoy.logLevel=info;reboot", `envoy.logLevel: "info;reboot" is not one of Envoy's log levels`},
	} {
		_, err := helmTemplate("--set", c.set)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("--set %s: error %v, want one containing %q", c.set, err, c.want)
		}
	}
}

// withRows runs fn with rows added to the table.
func withRows(t *testing.T, rows []row, fn func()) {
	t.Helper()
	saved := table
	table = append(slices.Clone(table), rows...)
	defer func() { table = saved }()
	fn()
}

// TestTableRefusesBadRows: a row the chart cannot honour fails the generation, naming the value
// and the fix: one whose value values.yaml does not document, one that selects no object, one
// that reads another default than the value's other rows, one whose field config/ lacks.
func TestTableRefusesBadRows(t *testing.T) {
	for _, c := range []struct {
		name string
		row  row
		want string
	}{
		{"undocumented value", row{value: "gateway.enabled", in: envoy, how: gateObjects},
			"values.yaml has no gateway.enabled, which a row of hack/chart's table templates: add it, with what it does, to valuesTemplate"},
		{"no such object", row{value: "crd.enabled", in: sel{kind: "StorageClass"}, how: gateObjects},
			"the value crd.enabled lands in config/default's StorageClass, which config/ does not hold"},
		{"defaults disagree", row{value: "manager.replicas", in: spireServer, at: "spec.replicas", how: setScalar},
			"manager.replicas is 1 at StatefulSet spire-server spec.replicas but 2 at Deployment aether-operator-controller-manager spec.replicas: the chart gives both the one value manager.replicas; make them one in config/"},
		{"no such field", row{value: "manager.replicas", in: agent, at: "spec.replicas", how: setScalar},
			"no spec.replicas"},
	} {
		t.Run(c.name, func(t *testing.T) {
			withRows(t, []row{c.row}, func() {
				_, err := generate(root)
				if err == nil || !strings.Contains(err.Error(), c.want) {
					t.Errorf("generate: error %v, want one containing %q", err, c.want)
				}
			})
		})
	}
	// The control: the table as it is generates.
	if _, err := generate(root); err != nil {
		t.Fatalf("generate with the table as it is: %v", err)
	}
}

// TestGateRow: a value that turns a component of the chart on is one row, selecting the
// component's objects by their label. Here the node Envoy's (app.kubernetes.io/name:
// aether-envoy) get a second value beside envoy.enabled (any boolean that values.yaml documents:
// agent.meshDNS), and helm renders them only when both are true.
func TestGateRow(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "chart")
	withRows(t, []row{{value: "agent.meshDNS", in: sel{label: "app.kubernetes.io/name=aether-envoy"}, how: gateObjects}}, func() {
		if err := run(root, dir, ""); err != nil {
			t.Fatal(err)
		}
	})
	for _, c := range []struct {
		set  []string
		want bool
	}{{nil, true}, {[]string{"agent.meshDNS=false"}, false}, {[]string{"envoy.enabled=false"}, false}} {
		out, err := exec.Command(helm, append([]string{"template", release, dir, "--namespace", namespace}, sets(c.set...)...)...).Output()
		if err != nil {
			t.Fatalf("helm template --set %v: %v", c.set, err)
		}
		objs := decodeObjects(t, out)
		has := slices.ContainsFunc(objs, func(o obj) bool { return id(o) == "DaemonSet/"+namespace+"/"+release+"-envoy" })
		if has != c.want {
			t.Errorf("--set %v: the node Envoy's DaemonSet rendered: %v, want %v", c.set, has, c.want)
		}
		// The row gates its component only: the agent's DaemonSet stays.
		if !slices.ContainsFunc(objs, func(o obj) bool { return id(o) == "DaemonSet/"+namespace+"/"+release+"-agent" }) {
			t.Errorf("--set %v: no agent DaemonSet", c.set)
		}
	}
}
