// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package csinode

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// mount is one line of /proc/self/mountinfo, the fields the plugin reads.
type mount struct {
	// Dev is the filesystem's st_dev (major:minor): every tmpfs has its own, so a bind of a pod's
	// tmpfs and the tmpfs itself share it and nothing else does.
	Dev    string
	Point  string
	Opts   string // per-mount options (rw,nosuid,...)
	FSType string
	Super  string // the superblock's options (size=...,mode=...)
}

// mounts reads the mount table of the calling process's mount namespace.
func mounts() ([]mount, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	var out []mount
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		m, err := parseMountinfoLine(sc.Text())
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, sc.Err()
}

// parseMountinfoLine parses one line of proc(5)'s mountinfo:
// id parent major:minor root mountpoint options [optional...] - fstype source superoptions
func parseMountinfoLine(line string) (mount, error) {
	fields := strings.Fields(line)
	sep := -1
	for i := 6; i < len(fields); i++ {
		if fields[i] == "-" {
			sep = i
			break
		}
	}
	if len(fields) < 6 || sep < 0 || sep+3 > len(fields) {
		return mount{}, fmt.Errorf("mountinfo: malformed line %q", line)
	}
	return mount{
		Dev:    fields[2],
		Point:  unescapeOctal(fields[4]),
		Opts:   fields[5],
		FSType: fields[sep+1],
		Super:  strings.Join(fields[sep+3:], " "),
	}, nil
}

// unescapeOctal undoes the kernel's \ooo escaping of space, tab, newline and backslash in paths.
func unescapeOctal(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// hasOpt reports whether the comma-separated option list opts holds opt.
func hasOpt(opts, opt string) bool {
	for o := range strings.SplitSeq(opts, ",") {
		if o == opt {
			return true
		}
	}
	return false
}
