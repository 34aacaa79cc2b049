// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package plugin

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aether-mesh/aether-operator/internal/version"
)

// Component is one of the mesh's workloads as `kubectl aether version` finds it: by the labels
// its manifests (config/) give its pods, and the container that runs it.
type Component struct {
	Name      string
	Labels    client.MatchingLabels
	Container string
}

// nameLabel is the recommended label every component's pods carry with their name.
const nameLabel = "app.kubernetes.io/name"

// Components are the mesh's workloads whose images version reports.
var Components = []Component{
	{Name: "manager", Labels: client.MatchingLabels{nameLabel: "aether-operator", "control-plane": "controller-manager"}, Container: "manager"},
	{Name: "agent", Labels: client.MatchingLabels{nameLabel: AgentLabel}, Container: "agent"},
	{Name: "proxy", Labels: client.MatchingLabels{nameLabel: "aether-envoy"}, Container: "envoy"},
}

// VersionReport is what version prints: the plugin's build and, unless --client, what runs in
// the cluster.
type VersionReport struct {
	Client version.Info `json:"client"`
	// Server is each component's images; nil with --client.
	Server []ComponentImages `json:"server,omitempty"`
}

// ComponentImages are the images one component's pods run, each with its pods: more than one
// image means an upgrade in progress, or pods left behind.
type ComponentImages struct {
	Component string       `json:"component"`
	Images    []ImageCount `json:"images"`
}

// ImageCount is one image and how many of the component's pods run it, and are ready.
type ImageCount struct {
	Image string `json:"image"`
	Pods  int    `json:"pods"`
	Ready int    `json:"ready"`
}

// ServerVersions lists every component's pods in every namespace and counts their images.
func ServerVersions(ctx context.Context, c client.Reader) ([]ComponentImages, error) {
	out := make([]ComponentImages, 0, len(Components))
	for _, comp := range Components {
		var pods corev1.PodList
		if err := c.List(ctx, &pods, comp.Labels); err != nil {
			if apierrors.IsForbidden(err) {
				return nil, &ExitError{Code: ExitUsage, Msg: "reading the mesh's pods: " + err.Error() + " (version needs list on pods in every namespace; --client prints the plugin's own build only)"}
			}
			return nil, fmt.Errorf("listing the %s's pods: %w", comp.Name, err)
		}
		byImage := map[string]*ImageCount{}
		for i := range pods.Items {
			pod := &pods.Items[i]
			image := imageOf(pod, comp.Container)
			n := byImage[image]
			if n == nil {
				n = &ImageCount{Image: image}
				byImage[image] = n
			}
			n.Pods++
			if podReady(pod) {
				n.Ready++
			}
		}
		ci := ComponentImages{Component: comp.Name, Images: []ImageCount{}}
		for _, n := range byImage {
			ci.Images = append(ci.Images, *n)
		}
		slices.SortFunc(ci.Images, func(a, b ImageCount) int { return cmp.Compare(a.Image, b.Image) })
		out = append(out, ci)
	}
	return out, nil
}

// imageOf is the image of pod's container named name, else of its first container.
func imageOf(pod *corev1.Pod, name string) string {
	for _, ctr := range pod.Spec.Containers {
		if ctr.Name == name {
			return ctr.Image
		}
	}
	if len(pod.Spec.Containers) > 0 {
		return pod.Spec.Containers[0].Image
	}
	return ""
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// WriteVersion prints the report as text.
func WriteVersion(w io.Writer, r VersionReport) error {
	var b strings.Builder
	fmt.Fprintf(&b, "kubectl-aether %s\n", r.Client)
	for _, ci := range r.Server {
		if len(ci.Images) == 0 {
			fmt.Fprintf(&b, "%-8s no pods found\n", ci.Component)
			continue
		}
		for _, n := range ci.Images {
			fmt.Fprintf(&b, "%-8s %s: %s, %d ready\n", ci.Component, n.Image, count(n.Pods, "pod"), n.Ready)
		}
		if len(ci.Images) > 1 {
			fmt.Fprintf(&b, "%-8s %d images in use: an upgrade in progress, or pods left behind\n", ci.Component, len(ci.Images))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// newVersionCommand is `kubectl aether version`: the plugin's own build and the images the mesh's
// pods run. The plugin's answers come from the rules compiled into it, so a bug report needs its
// line beside the operator's (each of the operator's binaries prints its own with --version).
func newVersionCommand(streams genericiooptions.IOStreams, flags *genericclioptions.ConfigFlags) *cobra.Command {
	var output string
	var clientOnly bool
	cmd := &cobra.Command{
		Use:   "version [--client]",
		Short: "Print the plugin's version, commit and Go version, and the images the mesh's pods run",
		Long: `Version prints the plugin's build (version, commit, Go version), then for each of the mesh's
components (the manager, the node agents, the node proxies) the images its pods run in every
namespace, with how many pods run each and how many are ready: two images for one component is
an upgrade in progress, or pods left behind. --client prints the plugin's build only, without
reading the cluster.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			report := VersionReport{Client: version.Get()}
			if !clientOnly {
				c, _, err := clientFor(flags)
				if err != nil {
					return err
				}
				if report.Server, err = ServerVersions(cmd.Context(), c); err != nil {
					return err
				}
			}
			if output != OutputText {
				return writeData(streams.Out, output, report)
			}
			return WriteVersion(streams.Out, report)
		},
	}
	cmd.Flags().BoolVar(&clientOnly, "client", false, "Print the plugin's build only, without reading the cluster")
	addOutputFlag(cmd, &output)
	return cmd
}
