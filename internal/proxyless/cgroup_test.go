// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package proxyless

import (
	"errors"
	"strings"
	"testing"
)

// TestPodUIDFromCgroup: the kubelet's pod cgroups under both drivers, cgroup v1 and v2, a path
// relative to a cgroup namespace, a static pod; a node process and a process whose cgroups name two
// pods are no pod's, and only the first is ErrNoPod (the node's own, which the node's xDS socket
// may be told to serve: internal/xdsserver's NodeEnvoy.Host). (The agent's xDS server reads the file of a real process in a real cgroup:
// internal/xdsserver's TestProxylessCallerFromItsCgroup.)
func TestPodUIDFromCgroup(t *testing.T) {
	const uid = "5f0b9c2e-1d3a-4e6f-8a7b-9c0d1e2f3a4b"
	underscored := strings.ReplaceAll(uid, "-", "_")
	for name, tc := range map[string]struct {
		content string
		want    string // empty: an error
		noPod   bool   // the error is ErrNoPod
	}{
		"v2, systemd":                            {content: "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + underscored + ".slice/cri-containerd-0a1b.scope\n", want: uid},
		"v2, systemd, guaranteed":                {content: "0::/kubepods.slice/kubepods-pod" + underscored + ".slice/cri-containerd-0a1b.scope\n", want: uid},
		"v2, cgroupfs":                           {content: "0::/kubepods/burstable/pod" + uid + "/0a1b\n", want: uid},
		"v2, read from another cgroup namespace": {content: "0::/../../kubepods-burstable-pod" + underscored + ".slice/cri-containerd-0a1b.scope\n", want: uid},
		"v1, cgroupfs, every hierarchy":          {content: "12:memory:/kubepods/besteffort/pod" + uid + "/0a1b\n1:name=systemd:/kubepods/besteffort/pod" + uid + "/0a1b\n0::/\n", want: uid},
		"v1, a hierarchy left at the root":       {content: "3:cpuset:/\n4:memory:/kubepods/pod" + uid + "/0a1b\n", want: uid},
		"a static pod":                           {content: "0::/kubepods/besteffort/pod0123456789abcdef0123456789abcdef/0a1b\n", want: "0123456789abcdef0123456789abcdef"},
		"the node's own process":                 {content: "0::/system.slice/containerd.service\n", noPod: true},
		"the root":                               {content: "0::/\n", noPod: true},
		"two pods":                               {content: "4:memory:/kubepods/pod" + uid + "/0a1b\n0::/kubepods/pod6f0b9c2e-1d3a-4e6f-8a7b-9c0d1e2f3a4b/0a1b\n"},
		"a pod-like name that is no UID":         {content: "0::/kubepods/besteffort/podcast/0a1b\n", noPod: true},
		"empty":                                  {noPod: true},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := PodUIDFromCgroup(tc.content)
			switch {
			case tc.want == "" && err == nil:
				t.Errorf("PodUIDFromCgroup(%q) = %q, want an error", tc.content, got)
			case tc.want != "" && (err != nil || got != tc.want):
				t.Errorf("PodUIDFromCgroup(%q) = %q, %v; want %q", tc.content, got, err, tc.want)
			case errors.Is(err, ErrNoPod) != tc.noPod:
				t.Errorf("PodUIDFromCgroup(%q): %v; ErrNoPod %v, want %v", tc.content, err, errors.Is(err, ErrNoPod), tc.noPod)
			}
		})
	}
}
