// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package plugin

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/aether-mesh/aether-operator/internal/portspec"
	"github.com/aether-mesh/aether-operator/internal/registration"
)

// Stdin is the file name that means standard input (kustomize build . | kubectl aether check -f -).
const Stdin = "-"

// Finding is one thing the admission webhook would say about one pod template.
type Finding struct {
	// File is the manifest's path ("-" for standard input).
	File string `json:"file"`
	// Document is the YAML document's position in File, from 1.
	Document int `json:"document"`
	// Item is the position in a List's items, from 1; 0 when the document is not a List.
	Item      int    `json:"item,omitempty"`
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	// Severity is "error" (the webhook denies the pod) or "warning" (it admits it with a warning).
	Severity string `json:"severity"`
	// Message is the webhook's text: the denial (portspec's ErrorList, one error per line) or one
	// warning.
	Message string `json:"message"`
}

// Severities of a Finding.
const (
	SeverityError   = "error"
	SeverityWarning = "warning"
)

// CheckReport is what Check found.
type CheckReport struct {
	// Templates is how many pod templates were read; Managed how many of them are in the mesh
	// (judged).
	Templates int       `json:"templates"`
	Managed   int       `json:"managed"`
	Findings  []Finding `json:"findings"`
}

// Errors is how many pod templates the webhook would deny.
func (r CheckReport) Errors() int {
	n := 0
	for _, f := range r.Findings {
		if f.Severity == SeverityError {
			n++
		}
	}
	return n
}

// PodTemplate is one pod template found in a manifest: where it is, and the labels and
// annotations the webhook reads.
type PodTemplate struct {
	File        string
	Document    int
	Item        int
	Kind        string
	Namespace   string
	Name        string
	Labels      map[string]string
	Annotations map[string]string
	// ServiceAccount is the template's spec.serviceAccountName ("" when it names none).
	ServiceAccount string
}

// Judge is the webhook's rule on one pod template, as on a CREATE: without the label, not judged;
// labelled with a value other than "true", not judged but warned (portspec.NotManagedWarning);
// else every problem of its ServiceAccount and annotations is one denial (registration.Problems),
// and portspec.Warnings are warnings.
func Judge(t PodTemplate) []Finding {
	finding := func(severity, msg string) Finding {
		return Finding{File: t.File, Document: t.Document, Item: t.Item, Kind: t.Kind, Namespace: t.Namespace,
			Name: t.Name, Severity: severity, Message: msg}
	}
	value, labelled := t.Labels[portspec.LabelManaged]
	switch {
	case !labelled:
		return nil
	case !portspec.IsManaged(t.Labels):
		return []Finding{finding(SeverityWarning, portspec.NotManagedWarning(value))}
	}
	var out []Finding
	if _, err := registration.Problems(t.pod()); err != nil {
		out = append(out, finding(SeverityError, err.Error()))
	}
	for _, w := range portspec.Warnings(t.Annotations) {
		out = append(out, finding(SeverityWarning, w))
	}
	return out
}

// pod is the pod the template makes, as far as registration.Problems reads it (its name,
// ServiceAccount and annotations): a Pod keeps its name; a workload's pods are named after it
// (web-*).
func (t PodTemplate) pod() *corev1.Pod {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: t.Namespace, Name: t.Name, Labels: t.Labels, Annotations: t.Annotations},
		Spec: corev1.PodSpec{ServiceAccountName: t.ServiceAccount}}
	if pod.Namespace == "" {
		pod.Namespace = "<namespace>"
	}
	if t.Kind != "Pod" {
		pod.Name, pod.GenerateName = "", t.Name+"-"
	}
	return pod
}

// Check reads every manifest in paths (files; directories' *.yaml, *.yml and *.json files, their
// subdirectories' too when recursive, as kubectl -R; or Stdin read from stdin) and judges every pod template in them. An error means input it could
// not read or decode; it names the file and document.
func Check(paths []string, recursive bool, stdin io.Reader) (CheckReport, error) {
	var report CheckReport
	for _, p := range paths {
		files, err := expand(p, recursive)
		if err != nil {
			return report, err
		}
		for _, f := range files {
			templates, err := readTemplates(f, stdin)
			if err != nil {
				return report, err
			}
			for _, t := range templates {
				report.Templates++
				if portspec.IsManaged(t.Labels) {
					report.Managed++
				}
				report.Findings = append(report.Findings, Judge(t)...)
			}
		}
	}
	return report, nil
}

// expand lists the manifests path names, in lexical order for a directory.
func expand(path string, recursive bool) ([]string, error) {
	if path == Stdin {
		return []string{Stdin}, nil
	}
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("-f %s: %w", path, err)
	}
	if !info.IsDir() {
		return []string{path}, nil
	}
	var files []string
	err = filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != path && !recursive {
			return filepath.SkipDir
		}
		switch strings.ToLower(filepath.Ext(p)) {
		case ".yaml", ".yml", ".json":
			if !d.IsDir() {
				files = append(files, p)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("-f %s: %w", path, err)
	}
	slices.Sort(files)
	return files, nil
}

// readTemplates decodes every document of file (stdin for Stdin) and returns its pod templates.
func readTemplates(file string, stdin io.Reader) ([]PodTemplate, error) {
	r := stdin
	if file != Stdin {
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		r = bytes.NewReader(data)
	}
	docs := utilyaml.NewYAMLReader(bufio.NewReader(r))
	var out []PodTemplate
	for doc := 1; ; doc++ {
		raw, err := docs.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", file, doc, err)
		}
		found, err := templatesIn(raw, PodTemplate{File: file, Document: doc})
		if err != nil {
			return nil, err
		}
		out = append(out, found...)
	}
}

// object is the part of any manifest Check reads: its kind and name, a List's items, and the
// pod template wherever the kind keeps it.
type object struct {
	Kind     string          `json:"kind"`
	Metadata metadata        `json:"metadata"`
	Items    []anyMap        `json:"items"`
	Spec     *templateHolder `json:"spec"`
}

// podSpec is the part of a pod's spec Check reads. serviceAccount is the deprecated spelling the
// API server still copies into serviceAccountName when that is unset.
type podSpec struct {
	ServiceAccountName string `json:"serviceAccountName"`
	ServiceAccount     string `json:"serviceAccount"`
}

func (s *podSpec) serviceAccount() string {
	if s == nil {
		return ""
	}
	if s.ServiceAccountName != "" {
		return s.ServiceAccountName
	}
	return s.ServiceAccount
}

type anyMap = map[string]any

type metadata struct {
	Name        string            `json:"name"`
	Namespace   string            `json:"namespace"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

// templateHolder is a workload's spec: its template (Deployment, StatefulSet, DaemonSet,
// ReplicaSet, Job) or its job template (CronJob).
type templateHolder struct {
	podSpec  `json:",inline"`
	Template *struct {
		Metadata metadata `json:"metadata"`
		Spec     *podSpec `json:"spec"`
	} `json:"template"`
	JobTemplate *struct {
		Spec *templateHolder `json:"spec"`
	} `json:"jobTemplate"`
}

// workloads are the kinds whose spec.template is a pod template.
var workloads = []string{"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"}

// templatesIn decodes one document (or one List item) at where.
func templatesIn(raw []byte, where PodTemplate) ([]PodTemplate, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil
	}
	var o object
	if err := yaml.Unmarshal(raw, &o); err != nil {
		return nil, fmt.Errorf("%s: %s: %w", where.File, place(where), err)
	}
	where.Kind, where.Namespace, where.Name = o.Kind, o.Metadata.Namespace, o.Metadata.Name
	var meta *metadata
	var spec *podSpec
	switch {
	case strings.HasSuffix(o.Kind, "List") && where.Item == 0:
		var out []PodTemplate
		for i, item := range o.Items {
			data, err := yaml.Marshal(item)
			if err != nil {
				return nil, err
			}
			found, err := templatesIn(data, PodTemplate{File: where.File, Document: where.Document, Item: i + 1})
			if err != nil {
				return nil, err
			}
			out = append(out, found...)
		}
		return out, nil
	case o.Kind == "Pod":
		meta = &o.Metadata
		if o.Spec != nil {
			spec = &o.Spec.podSpec
		}
	case slices.Contains(workloads, o.Kind) && o.Spec != nil && o.Spec.Template != nil:
		meta, spec = &o.Spec.Template.Metadata, o.Spec.Template.Spec
	case o.Kind == "CronJob" && o.Spec != nil && o.Spec.JobTemplate != nil && o.Spec.JobTemplate.Spec != nil &&
		o.Spec.JobTemplate.Spec.Template != nil:
		meta, spec = &o.Spec.JobTemplate.Spec.Template.Metadata, o.Spec.JobTemplate.Spec.Template.Spec
	default:
		return nil, nil
	}
	where.Labels, where.Annotations, where.ServiceAccount = meta.Labels, meta.Annotations, spec.serviceAccount()
	return []PodTemplate{where}, nil
}

// place is "document 2" or "document 2, item 3".
func place(t PodTemplate) string {
	if t.Item > 0 {
		return fmt.Sprintf("document %d, item %d", t.Document, t.Item)
	}
	return fmt.Sprintf("document %d", t.Document)
}

// object names the object as kubectl does: Kind namespace/name, or Kind name.
func (f Finding) object() string {
	if f.Namespace == "" {
		return f.Kind + " " + f.Name
	}
	return f.Kind + " " + f.Namespace + "/" + f.Name
}

// WriteCheck prints the report as text: one block per finding, then a summary.
func WriteCheck(w io.Writer, r CheckReport) error {
	var b strings.Builder
	for _, f := range r.Findings {
		where := PodTemplate{Document: f.Document, Item: f.Item}
		fmt.Fprintf(&b, "%s: %s: %s: %s:\n", f.File, place(where), f.object(), f.Severity)
		for line := range strings.SplitSeq(f.Message, "\n") {
			fmt.Fprintf(&b, "    %s\n", line)
		}
	}
	fmt.Fprintf(&b, "%s (%d in the mesh): %s denied, %s\n", count(r.Templates, "pod template"), r.Managed,
		count(r.Errors(), "pod template"), count(len(r.Findings)-r.Errors(), "warning"))
	_, err := io.WriteString(w, b.String())
	return err
}

// count is "1 warning" or "2 warnings".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
