// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Package seccomp owns the node Envoy's seccomp profile, envoy.json, embedded here as its one
// copy, and where it goes: the agent's install-seccomp (config/envoy's init container) writes it
// where the kubelet finds Localhost profiles. It imports nothing of Kubernetes.
//
// Why a profile of its own: Envoy's container holds CAP_SYS_ADMIN, for setns(2) into each pod's
// network namespace, and the runtime's default profile (RuntimeDefault) allows, to a container
// holding it, every call that capability guards: mount, umount2, unshare, bpf, the new mount API,
// clone with namespace flags, perf_event_open, syslog and more. envoy.json is containerd's default
// as it stands for a container without CAP_SYS_ADMIN (containerd v2.4.2, contrib/seccomp: its
// allow-list for amd64 and arm64, clone without CLONE_NEW* flags, clone3 answered ENOSYS so that
// the C library falls back to clone), plus setns into a network namespace only (nstype
// CLONE_NEWNET, what Envoy passes). CAP_NET_ADMIN and CAP_DAC_OVERRIDE, the container's other two
// capabilities, add no call to that default. The keyring calls (keyctl, add_key, request_key) are
// in neither. Anything else is refused with EPERM.
package seccomp

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
)

//go:embed envoy.json
var envoyProfile []byte

// Where the profile goes: the directory Dir of the kubelet's Localhost profiles (<kubelet root
// dir>/seccomp, /var/lib/kubelet/seccomp by default), file EnvoyFile. EnvoyLocalhostProfile is
// what Envoy's container names as its seccompProfile.localhostProfile, relative to that root.
const (
	Dir                   = "aether"
	EnvoyFile             = "envoy.json"
	EnvoyLocalhostProfile = Dir + "/" + EnvoyFile
)

// Envoy is the node Envoy's profile, as the runtime reads it.
func Envoy() []byte { return bytes.Clone(envoyProfile) }

// Profile is a seccomp profile in the runtime spec's JSON (what containerd reads for a Localhost
// profile: the fields of the OCI runtime spec's linux.seccomp).
type Profile struct {
	DefaultAction   string    `json:"defaultAction"`
	DefaultErrnoRet *uint     `json:"defaultErrnoRet,omitempty"`
	Architectures   []string  `json:"architectures"`
	Syscalls        []Syscall `json:"syscalls"`
}

// Syscall is one rule: the action for the calls named, when every argument condition holds.
type Syscall struct {
	Names    []string `json:"names"`
	Action   string   `json:"action"`
	ErrnoRet *uint    `json:"errnoRet,omitempty"`
	Args     []Arg    `json:"args,omitempty"`
}

// Arg is a condition on argument Index: Op compares it with Value (SCMP_CMP_MASKED_EQ: the
// argument masked with Value equals ValueTwo).
type Arg struct {
	Index    uint   `json:"index"`
	Value    uint64 `json:"value"`
	ValueTwo uint64 `json:"valueTwo,omitempty"`
	Op       string `json:"op"`
}

// Parse reads a profile strictly: a field the runtime spec does not have is an error, where the
// runtime would ignore it (a misspelt "errnoReturn" would silently leave EPERM in place of ENOSYS).
func Parse(data []byte) (Profile, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var p Profile
	if err := dec.Decode(&p); err != nil {
		return Profile{}, fmt.Errorf("seccomp profile: %w", err)
	}
	if dec.More() {
		return Profile{}, errors.New("seccomp profile: more than one JSON value")
	}
	return p, nil
}
