// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package seccomp

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// The expectations below come from the task the profile has, not from the profile: what must be
// refused (the calls CAP_SYS_ADMIN opens in the runtime's default profile that Envoy has no use
// for), and what a live Envoy 1.40 does call.

// refused are calls the profile must refuse, with the arguments a caller would give them. Calls
// taking no argument the rules look at are listed with none.
var refused = []struct {
	name string
	args []uint64
	why  string
}{
	{"mount", nil, "a new mount, or a bind of a namespace, inside the container"},
	{"umount", nil, "the mount family"},
	{"umount2", nil, "uncovering what a mount hides"},
	{"mount_setattr", nil, "the new mount API"},
	{"open_tree", nil, "the new mount API"},
	{"move_mount", nil, "the new mount API"},
	{"fsopen", nil, "the new mount API"},
	{"fsmount", nil, "the new mount API"},
	{"fsconfig", nil, "the new mount API"},
	{"fspick", nil, "the new mount API"},
	{"pivot_root", nil, "a new root"},
	{"chroot", nil, "a new root"},
	{"unshare", []uint64{unix.CLONE_NEWNET}, "a network namespace of its own"},
	{"unshare", []uint64{unix.CLONE_NEWNS}, "a mount namespace of its own, where mount would be its to use"},
	{"unshare", []uint64{unix.CLONE_NEWUSER}, "a user namespace, with every capability in it"},
	{"unshare", []uint64{0}, "unshare at all: Envoy never calls it"},
	{"clone", []uint64{unix.CLONE_NEWNET | uint64(unix.SIGCHLD)}, "a child in a new network namespace"},
	{"clone", []uint64{unix.CLONE_NEWNS | uint64(unix.SIGCHLD)}, "a child in a new mount namespace"},
	{"clone", []uint64{unix.CLONE_NEWUSER | uint64(unix.SIGCHLD)}, "a child in a new user namespace"},
	{"clone", []uint64{unix.CLONE_NEWPID | uint64(unix.SIGCHLD)}, "a child in a new PID namespace"},
	{"clone", []uint64{unix.CLONE_NEWUTS | uint64(unix.SIGCHLD)}, "a child in a new UTS namespace"},
	{"clone", []uint64{unix.CLONE_NEWIPC | uint64(unix.SIGCHLD)}, "a child in a new IPC namespace"},
	{"clone", []uint64{unix.CLONE_NEWCGROUP | uint64(unix.SIGCHLD)}, "a child in a new cgroup namespace"},
	{"setns", []uint64{3, 0}, "entering a namespace of any type the descriptor names"},
	{"setns", []uint64{3, unix.CLONE_NEWNS}, "entering a mount namespace"},
	{"setns", []uint64{3, unix.CLONE_NEWPID}, "entering a PID namespace"},
	{"setns", []uint64{3, unix.CLONE_NEWUSER}, "entering a user namespace"},
	{"bpf", nil, "loading BPF programs"},
	{"perf_event_open", nil, "the kernel's performance events"},
	{"keyctl", nil, "the kernel keyrings"},
	{"add_key", nil, "the kernel keyrings"},
	{"request_key", nil, "the kernel keyrings"},
	{"syslog", nil, "the node's kernel log"},
	{"fanotify_init", nil, "watching the node's file systems"},
	{"quotactl", nil, "file system quotas"},
	{"quotactl_fd", nil, "file system quotas"},
	{"lookup_dcookie", nil, "kernel profiling"},
	{"sethostname", nil, "the pod's host name"},
	{"setdomainname", nil, "the pod's domain name"},
	{"open_by_handle_at", nil, "opening files by handle, past the container's root"},
	{"init_module", nil, "kernel modules"},
	{"finit_module", nil, "kernel modules"},
	{"delete_module", nil, "kernel modules"},
	{"kexec_load", nil, "a new kernel"},
	{"reboot", nil, "rebooting"},
}

// clone's flags as glibc's pthread_create passes them (strace of Envoy 1.40's threads).
const threadFlags = unix.CLONE_VM | unix.CLONE_FS | unix.CLONE_FILES | unix.CLONE_SIGHAND | unix.CLONE_THREAD |
	unix.CLONE_SYSVSEM | unix.CLONE_SETTLS | unix.CLONE_PARENT_SETTID | unix.CLONE_CHILD_CLEARTID

// allowed are calls the profile must allow, with the arguments their caller gives: every call a
// live Envoy 1.40 made in the live tier (strace -f of Envoy in
// TestInboundListenerBeforeItsAppCluster and TestAPodWithoutIPv6InADualStackMesh: 57 distinct
// calls, clone3 among them, checked apart below) and those of the container's script (dash,
// sleep: fork, wait, exec).
var allowed = []struct {
	name string
	args []uint64
}{
	{"setns", []uint64{3, unix.CLONE_NEWNET}}, // entering a pod's network namespace: all Envoy's setns calls
	{"socket", []uint64{unix.AF_INET}}, {"socket", []uint64{unix.AF_INET6}},
	{"socket", []uint64{unix.AF_UNIX}}, {"socket", []uint64{unix.AF_NETLINK}},
	{"clone", []uint64{threadFlags}},
	{"clone", []uint64{uint64(unix.SIGCHLD)}}, // fork
	{"setsockopt", nil}, {"getsockopt", nil}, {"bind", nil}, {"listen", nil}, {"accept4", nil},
	{"connect", nil}, {"getsockname", nil}, {"sendto", nil}, {"recvmsg", nil}, {"readv", nil},
	{"writev", nil}, {"read", nil}, {"write", nil}, {"close", nil}, {"openat", nil}, {"pread64", nil},
	{"lseek", nil}, {"newfstatat", nil}, {"readlink", nil}, {"access", nil}, {"unlink", nil},
	{"fchmod", nil}, {"ftruncate", nil}, {"pipe2", nil}, {"eventfd2", nil}, {"poll", nil},
	{"epoll_create1", nil}, {"epoll_ctl", nil}, {"epoll_wait", nil}, {"epoll_pwait", nil},
	{"mmap", nil}, {"munmap", nil}, {"mprotect", nil}, {"madvise", nil}, {"mincore", nil}, {"brk", nil},
	{"futex", nil}, {"rseq", nil}, {"set_robust_list", nil}, {"set_tid_address", nil},
	{"rt_sigaction", nil}, {"rt_sigprocmask", nil}, {"sigaltstack", nil}, {"prctl", nil},
	{"arch_prctl", nil}, {"prlimit64", nil}, {"getrandom", nil}, {"gettid", nil}, {"getpid", nil},
	{"sched_getscheduler", nil}, {"sched_getparam", nil}, {"sched_yield", nil},
	{"clock_nanosleep", nil}, {"nanosleep", nil}, {"execve", nil}, {"wait4", nil}, {"exit_group", nil},
}

// decide is what a filter built from p does with a call of name with args (libseccomp's
// semantics for the rules p uses: a rule applies when every one of its argument conditions
// holds; the first rule that applies decides, else the default).
func decide(p Profile, name string, args []uint64) (action string, errno uint) {
	for _, r := range p.Syscalls {
		if !slices.Contains(r.Names, name) || !argsHold(r.Args, args) {
			continue
		}
		if r.ErrnoRet != nil {
			errno = *r.ErrnoRet
		}
		return r.Action, errno
	}
	if p.DefaultErrnoRet != nil {
		errno = *p.DefaultErrnoRet
	}
	return p.DefaultAction, errno
}

func argsHold(conds []Arg, args []uint64) bool {
	for _, c := range conds {
		var v uint64
		if int(c.Index) < len(args) {
			v = args[c.Index]
		}
		var ok bool
		switch c.Op {
		case "SCMP_CMP_EQ":
			ok = v == c.Value
		case "SCMP_CMP_NE":
			ok = v != c.Value
		case "SCMP_CMP_LT":
			ok = v < c.Value
		case "SCMP_CMP_LE":
			ok = v <= c.Value
		case "SCMP_CMP_GT":
			ok = v > c.Value
		case "SCMP_CMP_GE":
			ok = v >= c.Value
		case "SCMP_CMP_MASKED_EQ":
			ok = v&c.Value == c.ValueTwo
		}
		if !ok {
			return false
		}
	}
	return true
}

// architectures are those of the nodes the project builds for (amd64 and arm64, with their
// compat ABIs, as containerd's default lists them): a call of an architecture the filter does
// not list is killed, not refused.
var architectures = []string{"SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32", "SCMP_ARCH_AARCH64", "SCMP_ARCH_ARM"}

var (
	actions = []string{"SCMP_ACT_ALLOW", "SCMP_ACT_ERRNO"}
	ops     = []string{"SCMP_CMP_EQ", "SCMP_CMP_NE", "SCMP_CMP_LT", "SCMP_CMP_LE", "SCMP_CMP_GT", "SCMP_CMP_GE", "SCMP_CMP_MASKED_EQ"}
)

// problems lists how p falls short of Envoy's profile.
func problems(p Profile) []string {
	var out []string
	report := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	if p.DefaultAction != "SCMP_ACT_ERRNO" || p.DefaultErrnoRet == nil || *p.DefaultErrnoRet != uint(unix.EPERM) {
		report("the default is %s (errno %v): want SCMP_ACT_ERRNO with EPERM, every call not allowed refused", p.DefaultAction, p.DefaultErrnoRet)
	}
	for _, a := range architectures {
		if !slices.Contains(p.Architectures, a) {
			report("architecture %s is not listed: its calls would be killed on a node of that architecture", a)
		}
	}
	actionOf := map[string]string{}
	for i, r := range p.Syscalls {
		if !slices.Contains(actions, r.Action) {
			report("rule %d (%v): action %q is none of %v", i, r.Names, r.Action, actions)
		}
		var indexes []uint
		for _, a := range r.Args {
			if !slices.Contains(ops, a.Op) {
				report("rule %d (%v): op %q is none of %v", i, r.Names, a.Op, ops)
			}
			// runc makes two conditions on one argument two rules, either of which allows.
			if slices.Contains(indexes, a.Index) {
				report("rule %d (%v): two conditions on argument %d, which runc ORs", i, r.Names, a.Index)
			}
			indexes = append(indexes, a.Index)
		}
		for _, n := range r.Names {
			if prev, ok := actionOf[n]; ok && prev != r.Action {
				report("%s is both %s and %s: libseccomp's choice, not the profile's", n, prev, r.Action)
			}
			actionOf[n] = r.Action
		}
	}
	for _, c := range refused {
		if action, _ := decide(p, c.name, c.args); action == "SCMP_ACT_ALLOW" {
			report("%s%v is allowed: %s", c.name, c.args, c.why)
		}
	}
	for _, c := range allowed {
		if action, errno := decide(p, c.name, c.args); action != "SCMP_ACT_ALLOW" {
			report("%s%v is refused (%s, errno %d): Envoy or its container's script calls it", c.name, c.args, action, errno)
		}
	}
	// glibc's threads: clone3 first, and clone with the same flags only when clone3 says ENOSYS.
	if action, errno := decide(p, "clone3", nil); action != "SCMP_ACT_ERRNO" || errno != uint(unix.ENOSYS) {
		report("clone3 gets %s (errno %d): want ENOSYS, so that glibc falls back to clone, whose flags the filter can read", action, errno)
	}
	return out
}

// TestEnvoyProfile: the embedded profile parses strictly and meets problems' checks.
func TestEnvoyProfile(t *testing.T) {
	p, err := Parse(Envoy())
	if err != nil {
		t.Fatal(err)
	}
	if ps := problems(p); len(ps) > 0 {
		t.Errorf("envoy.json:\n%s", strings.Join(ps, "\n"))
	}
	allowedNames := 0
	for _, r := range p.Syscalls {
		if r.Action == "SCMP_ACT_ALLOW" {
			allowedNames += len(r.Names)
		}
	}
	t.Logf("%d rules, %d names allowed (with or without conditions)", len(p.Syscalls), allowedNames)
}

// TestProblemsCatchABrokenProfile: each way of breaking the profile is reported (the negative
// controls of TestEnvoyProfile), and Parse refuses a field the runtime would ignore.
func TestProblemsCatchABrokenProfile(t *testing.T) {
	withRule := func(p *Profile, name string) *Syscall {
		for i := range p.Syscalls {
			if slices.Contains(p.Syscalls[i].Names, name) {
				return &p.Syscalls[i]
			}
		}
		t.Fatalf("no rule names %s", name)
		return nil
	}
	without := func(p *Profile, name string) {
		for i := range p.Syscalls {
			p.Syscalls[i].Names = slices.DeleteFunc(p.Syscalls[i].Names, func(n string) bool { return n == name })
		}
	}
	for what, c := range map[string]struct {
		breakIt func(p *Profile)
		want    string
	}{
		"mount allowed":   {func(p *Profile) { p.Syscalls[0].Names = append(p.Syscalls[0].Names, "mount") }, "mount[] is allowed"},
		"unshare allowed": {func(p *Profile) { p.Syscalls[0].Names = append(p.Syscalls[0].Names, "unshare") }, "unshare[1073741824] is allowed"},
		"bpf allowed":     {func(p *Profile) { p.Syscalls[0].Names = append(p.Syscalls[0].Names, "bpf") }, "bpf[] is allowed"},
		"keyctl allowed":  {func(p *Profile) { p.Syscalls[0].Names = append(p.Syscalls[0].Names, "keyctl") }, "keyctl[] is allowed"},
		"clone with any flags": {func(p *Profile) { withRule(p, "clone").Args = nil },
			fmt.Sprintf("clone[%d] is allowed", unix.CLONE_NEWNET|uint64(unix.SIGCHLD))},
		"setns into any namespace": {func(p *Profile) { withRule(p, "setns").Args = nil }, "setns[3 0] is allowed"},
		"no setns":                 {func(p *Profile) { without(p, "setns") }, "setns[3 1073741824] is refused"},
		"no epoll_wait":            {func(p *Profile) { without(p, "epoll_wait") }, "epoll_wait[] is refused"},
		"no AF_INET6": {func(p *Profile) {
			p.Syscalls = slices.DeleteFunc(p.Syscalls, func(r Syscall) bool { return slices.Contains(r.Names, "socket") })
		}, "socket[10] is refused"},
		"clone3 refused with EPERM": {func(p *Profile) { withRule(p, "clone3").ErrnoRet = nil }, "clone3 gets SCMP_ACT_ERRNO (errno 0): want ENOSYS"},
		"allow by default":          {func(p *Profile) { p.DefaultAction = "SCMP_ACT_ALLOW" }, "the default is SCMP_ACT_ALLOW"},
		"no arm64":                  {func(p *Profile) { p.Architectures = p.Architectures[:3] }, "architecture SCMP_ARCH_AARCH64 is not listed"},
		"two conditions on one argument": {func(p *Profile) {
			r := withRule(p, "setns")
			r.Args = append(r.Args, Arg{Index: 1, Value: 0, Op: "SCMP_CMP_EQ"})
		}, "two conditions on argument 1"},
		"a call both allowed and refused": {func(p *Profile) {
			p.Syscalls = append(p.Syscalls, Syscall{Names: []string{"read"}, Action: "SCMP_ACT_ERRNO"})
		}, "read is both SCMP_ACT_ALLOW and SCMP_ACT_ERRNO"},
	} {
		t.Run(what, func(t *testing.T) {
			p, err := Parse(Envoy())
			if err != nil {
				t.Fatal(err)
			}
			c.breakIt(&p)
			if got := strings.Join(problems(p), "\n"); !strings.Contains(got, c.want) {
				t.Errorf("want a problem saying %q, got:\n%s", c.want, got)
			}
		})
	}

	misspelt := strings.Replace(string(Envoy()), `"errnoRet"`, `"errnoReturn"`, 1)
	if _, err := Parse([]byte(misspelt)); err == nil || !strings.Contains(err.Error(), `unknown field "errnoReturn"`) {
		t.Errorf("Parse of a profile with errnoReturn: %v, want an unknown field error", err)
	}
}
