// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package proxyless

import (
	"errors"
	"fmt"
	"strings"
)

// ErrNoPod says a process runs in no pod's cgroup: a process of the node itself (its services, a
// shell), not of a container the kubelet started.
var ErrNoPod = errors.New("it runs in no pod's cgroup (no path segment pod<uid>): not a pod's process")

// PodUIDFromCgroup is the UID of the pod whose cgroup holds a process, read from the process's
// /proc/<pid>/cgroup (its content, one "<hierarchy>:<controllers>:<path>" line per hierarchy).
//
// The kubelet names each pod's cgroup after the pod's UID, whatever its cgroup driver:
//   - cgroupfs: .../kubepods/<qos>/pod<uid>/<container> (the UID with its dashes);
//   - systemd: .../kubepods-<qos>-pod<uid>.slice/<container>.scope (dashes written as
//     underscores, as a systemd unit name cannot hold them).
//
// Guaranteed pods have no <qos> level. The path may be relative to the reader's cgroup namespace
// ("/../../kubepods-...", cgroup v2 with a private namespace): only its segments count. cgroup v1
// lists one line per hierarchy, v2 one; every line that names a pod must name the same one. A
// process in no pod's cgroup (the node's own) is ErrNoPod: the caller is no pod.
func PodUIDFromCgroup(content string) (string, error) {
	uid := ""
	for line := range strings.Lines(content) {
		_, path, ok := cutPath(strings.TrimSpace(line))
		if !ok {
			continue
		}
		for segment := range strings.SplitSeq(path, "/") {
			found, ok := podSegment(segment)
			if !ok {
				continue
			}
			if uid != "" && uid != found {
				return "", fmt.Errorf("its cgroups name two pods, %s and %s: refusing to choose", uid, found)
			}
			uid = found
		}
	}
	if uid == "" {
		return "", ErrNoPod
	}
	return uid, nil
}

// cutPath splits a /proc/<pid>/cgroup line "<id>:<controllers>:<path>" (the path may hold ':').
func cutPath(line string) (hierarchy, path string, ok bool) {
	hierarchy, rest, ok := strings.Cut(line, ":")
	if !ok {
		return "", "", false
	}
	_, path, ok = strings.Cut(rest, ":")
	return hierarchy, path, ok
}

// podSegment is the pod UID a cgroup path segment names: "pod<uid>" (cgroupfs) or
// "kubepods[-<qos>]-pod<uid_with_underscores>.slice" (systemd).
func podSegment(segment string) (string, bool) {
	segment = strings.TrimSuffix(segment, ".slice")
	var uid string
	switch {
	case strings.HasPrefix(segment, "pod"):
		uid = strings.TrimPrefix(segment, "pod")
	case strings.HasPrefix(segment, "kubepods-"):
		i := strings.LastIndex(segment, "-pod")
		if i < 0 {
			return "", false
		}
		uid = strings.ReplaceAll(segment[i+len("-pod"):], "_", "-")
	default:
		return "", false
	}
	return uid, isPodUID(uid)
}

// isPodUID reports whether s has the shape of a pod UID: a UUID the API server assigned, or the
// 32 hex digits the kubelet gives a static pod (a hash of its manifest).
func isPodUID(s string) bool {
	if len(s) != 36 && len(s) != 32 {
		return false
	}
	for i, r := range s {
		dash := len(s) == 36 && (i == 8 || i == 13 || i == 18 || i == 23)
		switch {
		case dash && r == '-':
		case !dash && (r >= '0' && r <= '9' || r >= 'a' && r <= 'f'):
		default:
			return false
		}
	}
	return true
}
