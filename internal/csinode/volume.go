// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package csinode

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// DefaultSocketDir is where the pods' socket directories live on the node: the node's Envoy dials
// <DefaultSocketDir>/<pod-uid>/<file> and the agent probes the same path.
const DefaultSocketDir = "/run/aether/uds"

// DefaultSize is the tmpfs's size: a directory for one socket file (and what the app keeps beside
// it) needs next to nothing; the cap keeps a pod from filling the node's memory through it.
const DefaultSize = 1 << 20

// mountFlags are the tmpfs's and the bind's: a socket directory holds sockets, never programs
// (noexec, nosuid), devices (nodev) or symlinks anyone follows (nosymfollow: the proxy, root,
// dials a path in a directory the pod writes). A variable so that a test can leave one out, as a
// kernel that does not know it does (before 5.10, MS_NOSYMFOLLOW is ignored without a word).
var mountFlags uintptr = unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC | unix.MS_NOSYMFOLLOW

// mountOptions are mountFlags as the mount table spells them: what Publish reads back.
var mountOptions = []string{"nosuid", "nodev", "noexec", "nosymfollow"}

// errKernel: the kernel did not apply a flag the volume needs.
var errKernel = errors.New("the kernel did not apply the socket directory's mount flags")

// dirMode is the tmpfs root's mode: the owner (root) and the pod's fsGroup read and write;
// setgid, so a socket the app creates belongs to the fsGroup too, and 0660 on it lets the pod's
// other containers in and nobody else.
const dirMode = 0o2770

// podUIDPattern is the form of a Kubernetes UID: the directory name is built from it, so nothing
// else (a slash, "..") may reach the path.
var podUIDPattern = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// Volumes mounts and unmounts the pods' socket directories on the node's kernel.
type Volumes struct {
	// Dir holds one tmpfs per pod, named by the pod's UID (DefaultSocketDir).
	Dir string
	// Size is each tmpfs's size in bytes (DefaultSize).
	Size int64
}

// errInUse: the pod's socket directory is already bound onto another target, a second
// csi.aether.io volume of the same pod.
var errInUse = errors.New("in use")

// PodDir is the host directory of pod uid's tmpfs.
func (v Volumes) PodDir(uid string) string { return filepath.Join(v.Dir, uid) }

// Publish mounts pod uid's tmpfs (root:gid, mode 2770) at PodDir(uid) and binds it onto target.
// Idempotent: what is already mounted is kept, so the kubelet may retry after any failure.
func (v Volumes) Publish(uid string, gid uint32, target string, readOnly bool) error {
	if !podUIDPattern.MatchString(uid) {
		return fmt.Errorf("pod UID %q is not a Kubernetes UID", uid)
	}
	dir := v.PodDir(uid)
	if err := os.MkdirAll(v.Dir, 0o755); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	table, err := mounts()
	if err != nil {
		return err
	}
	tmpfs, mounted := find(table, dir)
	if !mounted || tmpfs.FSType != "tmpfs" {
		// Owner and mode are the tmpfs's own options, so the directory is never briefly
		// root-only or world-anything: it appears as it stays.
		opts := "size=" + strconv.FormatInt(v.Size, 10) + ",mode=" + strconv.FormatUint(dirMode, 8) +
			",uid=0,gid=" + strconv.FormatUint(uint64(gid), 10)
		if err := unix.Mount("tmpfs", dir, "tmpfs", mountFlags, opts); err != nil {
			return fmt.Errorf("mount tmpfs at %s: %w", dir, err)
		}
		if table, err = mounts(); err != nil {
			return err
		}
		tmpfs, _ = find(table, dir)
		if err := applied(tmpfs); err != nil {
			_ = unix.Unmount(dir, 0)
			return err
		}
	}
	// A retry after a failure between the mount and this point: the owner may not be set yet.
	if err := unix.Chown(dir, 0, int(gid)); err != nil {
		return err
	}
	if err := unix.Chmod(dir, dirMode); err != nil {
		return err
	}
	if bound, ok := find(table, target); ok && bound.Dev == tmpfs.Dev {
		return nil
	}
	for _, m := range table {
		if m.Dev == tmpfs.Dev && m.Point != dir && m.Point != target {
			return fmt.Errorf("%w: the pod's socket directory is already the volume at %s", errInUse, m.Point)
		}
	}
	if err := os.MkdirAll(target, 0o750); err != nil {
		return err
	}
	return bind(dir, target, readOnly)
}

// bind mounts source onto target with mountFlags (and read-only when readOnly), reads the flags
// back, and takes the bind away again when one did not take.
func bind(source, target string, readOnly bool) error {
	if err := unix.Mount(source, target, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind %s onto %s: %w", source, target, err)
	}
	// A bind takes no flags of its own on the first call: a remount of the bind sets them.
	flags := unix.MS_BIND | unix.MS_REMOUNT | mountFlags
	want := "nosuid,nodev,noexec,nosymfollow"
	if readOnly {
		flags |= unix.MS_RDONLY
		want = "ro," + want
	}
	if err := unix.Mount("", target, "", flags, ""); err != nil {
		_ = unix.Unmount(target, 0)
		return fmt.Errorf("remount %s %s: %w", target, want, err)
	}
	table, err := mounts()
	if err != nil {
		return err
	}
	bound, _ := find(table, target)
	err = applied(bound)
	if err == nil && readOnly && !slices.Contains(strings.Split(bound.Opts, ","), "ro") {
		err = fmt.Errorf("%w: %s is mounted %s, not read-only", errKernel, target, bound.Opts)
	}
	if err != nil {
		_ = unix.Unmount(target, 0)
	}
	return err
}

// errNoDirectory: the node directory a volume carries is not there (yet).
var errNoDirectory = errors.New("no such directory on the node")

// PublishNodeDirectory binds the node's directory dir onto target, read-only, nosuid, nodev,
// noexec and nosymfollow: a directory of the node's (SPIRE's agent socket directory) carried to a
// pod without a hostPath volume. Idempotent: a target that already is dir is kept.
func (v Volumes) PublishNodeDirectory(dir, target string) error {
	var src unix.Stat_t
	if err := unix.Stat(dir, &src); err != nil {
		return fmt.Errorf("%w: %s: %v", errNoDirectory, dir, err)
	}
	if src.Mode&unix.S_IFMT != unix.S_IFDIR {
		return fmt.Errorf("%w: %s is not a directory", errNoDirectory, dir)
	}
	table, err := mounts()
	if err != nil {
		return err
	}
	if _, ok := find(table, target); ok {
		var at unix.Stat_t
		if err := unix.Stat(target, &at); err == nil && at.Dev == src.Dev && at.Ino == src.Ino {
			return nil
		}
		return fmt.Errorf("%s is mounted already, and not from %s", target, dir)
	}
	if err := os.MkdirAll(target, 0o750); err != nil {
		return err
	}
	return bind(dir, target, true)
}

// applied checks m's options, read back from the mount table, for every one of mountOptions: a
// kernel ignores a flag it does not know, and nosymfollow is what keeps the node's proxy, root,
// from following a symlink the pod leaves where its socket should be (to the node's xDS socket,
// say).
func applied(m mount) error {
	have := strings.Split(m.Opts, ",")
	for _, o := range mountOptions {
		if !slices.Contains(have, o) {
			var uts unix.Utsname
			_ = unix.Uname(&uts)
			return fmt.Errorf("%w: %s is mounted %s, without %s (Linux %s; nosymfollow needs 5.10 or later): "+
				"a pod could leave a symlink there that the node's proxy follows, so the volume is refused",
				errKernel, m.Point, m.Opts, o, unix.ByteSliceToString(uts.Release[:]))
		}
	}
	return nil
}

// Unpublish undoes Publish for target: the pod's tmpfs first (found as the mount of the same
// filesystem under Dir), then the bind on target. In that order a retry after a partial failure
// still finds the bind, and through it the tmpfs. Idempotent: nothing mounted is no error.
func (v Volumes) Unpublish(target string) error {
	table, err := mounts()
	if err != nil {
		return err
	}
	bound, ok := find(table, target)
	if ok {
		for _, m := range table {
			if m.Dev == bound.Dev && filepath.Dir(m.Point) == filepath.Clean(v.Dir) {
				if err := unix.Unmount(m.Point, 0); err != nil && !errors.Is(err, unix.EINVAL) {
					return fmt.Errorf("unmount %s: %w", m.Point, err)
				}
				if err := os.Remove(m.Point); err != nil && !errors.Is(err, os.ErrNotExist) {
					return err
				}
			}
		}
		// Stacked mounts on target (a retried bind): take every one off.
		for ok {
			if err := unix.Unmount(target, 0); errors.Is(err, unix.EINVAL) {
				break // not a mount point after all
			} else if err != nil {
				return fmt.Errorf("unmount %s: %w", target, err)
			}
			if table, err = mounts(); err != nil {
				return err
			}
			_, ok = find(table, target)
		}
	} else if m := kubeletTarget.FindStringSubmatch(filepath.Clean(target)); m != nil {
		// Nothing bound on target: a publish that failed after it mounted the pod's tmpfs. The
		// kubelet's path names the pod; its tmpfs goes unless a bind still holds it.
		if err := v.removeUnbound(table, v.PodDir(m[1])); err != nil {
			return err
		}
	}
	if err := os.Remove(target); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// kubeletTarget is the kubelet's target path of a pod's inline CSI volume:
// <kubelet root>/pods/<pod-uid>/volumes/kubernetes.io~csi/<volume>/mount.
var kubeletTarget = regexp.MustCompile(`/pods/([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})/volumes/kubernetes\.io~csi/[^/]+/mount$`)

// removeUnbound unmounts the pod's tmpfs at dir and removes dir, unless the tmpfs is still bound
// somewhere else.
func (v Volumes) removeUnbound(table []mount, dir string) error {
	if tmpfs, mounted := find(table, dir); mounted {
		for _, m := range table {
			if m.Dev == tmpfs.Dev && m.Point != dir {
				return nil
			}
		}
		if err := unix.Unmount(dir, 0); err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("unmount %s: %w", dir, err)
		}
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// find returns the topmost mount at point.
func find(table []mount, point string) (mount, bool) {
	point = filepath.Clean(point)
	var found mount
	ok := false
	for _, m := range table {
		if m.Point == point {
			found, ok = m, true
		}
	}
	return found, ok
}
