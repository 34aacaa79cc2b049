// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/aether-mesh/aether-operator/internal/golden"
	"github.com/aether-mesh/aether-operator/internal/webhook"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// run runs kubectl aether with args and stdin as main does, and returns what it wrote (standard
// output, then main's "error:" line) and its exit status.
func run(t *testing.T, stdin string, args ...string) (string, int) {
	t.Helper()
	var out bytes.Buffer
	cmd := NewCommand(genericiooptions.IOStreams{In: strings.NewReader(stdin), Out: &out, ErrOut: &out})
	cmd.SetArgs(args)
	err := cmd.Execute()
	if err == nil {
		return out.String(), 0
	}
	fmt.Fprintln(&out, "error:", err)
	if exit, ok := errors.AsType[*ExitError](err); ok {
		return out.String(), exit.Code
	}
	return out.String(), ExitUsage
}

const checkData = "testdata/check"

// TestCheckGolden runs check on the fixtures, from files, a directory and standard input, as text
// and JSON: output and exit status against testdata/check/<case>.out.
func TestCheckGolden(t *testing.T) {
	workloads, err := os.ReadFile(filepath.Join(checkData, "workloads.in.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		stdin string
		args  []string
	}{
		"clean":             {args: []string{"check", "-f", checkData + "/clean.in.yaml"}},
		"workloads":         {args: []string{"check", "-f", checkData + "/workloads.in.yaml"}},
		"list":              {args: []string{"check", "-f", checkData + "/list.in.yaml"}},
		"unmanaged":         {args: []string{"check", "-f", checkData + "/unmanaged.in.yaml"}},
		"malformed":         {args: []string{"check", "-f", checkData + "/malformed.in.yaml"}},
		"missing":           {args: []string{"check", "-f", checkData + "/no-such-file.yaml"}},
		"no-file":           {args: []string{"check"}},
		"bad-output":        {args: []string{"check", "-f", checkData + "/clean.in.yaml", "-o", "wide"}},
		"stdin":             {stdin: string(workloads), args: []string{"check", "-f", "-"}},
		"stdin-json":        {stdin: string(workloads), args: []string{"check", "-f", "-", "-o", "json"}},
		"two-files-yaml":    {args: []string{"check", "-f", checkData + "/list.in.yaml", "-f", checkData + "/clean.in.yaml", "-o", "yaml"}},
		"samples":           {args: []string{"check", "-f", "../../config/samples"}},
		"samples-bad":       {args: []string{"check", "-f", "../../config/samples/bad"}},
		"samples-recursive": {args: []string{"check", "-R", "-f", "../../config/samples"}},
	}
	names := make([]string, 0, len(cases))
	for name, c := range cases {
		names = append(names, name)
		out, code := run(t, c.stdin, c.args...)
		got := fmt.Sprintf("$ kubectl aether %s\n%sexit status %d\n", strings.Join(c.args, " "), out, code)
		golden.Compare(t, checkData, name, ".out", []byte(got), *update)
	}
	golden.Orphans(t, checkData, names, ".args", ".out", *update)
}

// TestCheckExitStatus pins the statuses scripts rely on, apart from the golden files' text.
func TestCheckExitStatus(t *testing.T) {
	for args, want := range map[string]int{
		"check -f ../../config/samples":              0,
		"check -f ../../config/samples/bad":          ExitFound,
		"check -f testdata/check/workloads.in.yaml":  ExitFound,
		"check -f testdata/check/unmanaged.in.yaml":  0,
		"check -f testdata/check/malformed.in.yaml":  ExitUsage,
		"check -f testdata/check/absent.yaml":        ExitUsage,
		"check -f testdata/check/clean.in.yaml -o x": ExitUsage,
	} {
		if _, got := run(t, "", strings.Fields(args)...); got != want {
			t.Errorf("kubectl aether %s: exit status %d, want %d", args, got, want)
		}
	}
}

// TestCheckSpeaksAsTheWebhook is the acceptance of check: for every pod template in the fixtures
// and in config/samples, the pod admission webhook's own handler (webhook.PodValidator.Handle, as
// the API server calls it on a CREATE) denies exactly the pods check reports as errors, with the
// same text, and returns the same warnings (a label value other than "true" included).
func TestCheckSpeaksAsTheWebhook(t *testing.T) {
	paths := []string{"../../config/samples", "../../config/samples/bad", checkData + "/workloads.in.yaml",
		checkData + "/list.in.yaml", checkData + "/unmanaged.in.yaml", checkData + "/clean.in.yaml"}
	var templates []PodTemplate
	for _, p := range paths {
		files, err := expand(p, false)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			found, err := readTemplates(f, nil)
			if err != nil {
				t.Fatal(err)
			}
			templates = append(templates, found...)
		}
	}
	validator := &webhook.PodValidator{Decoder: admission.NewDecoder(scheme(t))}
	denied := 0
	for _, tmpl := range templates {
		what := fmt.Sprintf("%s %s %s/%s", place(tmpl), tmpl.Kind, tmpl.Namespace, tmpl.Name)
		resp := validator.Handle(context.Background(), admissionRequest(t, tmpl))
		var wantDenial string
		var wantWarnings []string
		for _, f := range Judge(tmpl) {
			if f.Severity == SeverityError {
				wantDenial = f.Message
			} else {
				wantWarnings = append(wantWarnings, f.Message)
			}
		}
		if wantDenial != "" {
			denied++
			if resp.Allowed || resp.Result == nil || resp.Result.Message != wantDenial {
				t.Errorf("%s: check says denied with\n%s\nthe webhook answered allowed=%v %+v", what, wantDenial, resp.Allowed, resp.Result)
			}
		} else if !resp.Allowed {
			t.Errorf("%s: check finds no error; the webhook denied it: %+v", what, resp.Result)
		}
		if !slices.Equal(resp.Warnings, wantWarnings) {
			t.Errorf("%s: check warns %q, the webhook %q", what, wantWarnings, resp.Warnings)
		}
	}
	// Every mistake of config/samples/bad's pod and of workloads.in.yaml (7 templates) is found.
	if denied < 8 {
		t.Errorf("%d pod templates denied, want at least 8 (config/samples/bad and every workload fixture)", denied)
	}
}

func scheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

// admissionRequest is the CREATE the API server sends for a pod made from tmpl.
func admissionRequest(t *testing.T, tmpl PodTemplate) admission.Request {
	t.Helper()
	// The pod the template makes (a workload's pods are named after it), with its ServiceAccount.
	pod := tmpl.pod()
	pod.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
	pod.Labels, pod.Annotations = tmpl.Labels, tmpl.Annotations
	raw, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: "check", Operation: admissionv1.Create, Namespace: tmpl.Namespace, Name: tmpl.Name,
		Kind:   metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
		Object: runtime.RawExtension{Raw: raw},
	}}
}
