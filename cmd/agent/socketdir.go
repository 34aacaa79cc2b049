// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// prepareSocketDir makes dir (a hostPath the kubelet creates root-owned) the agent's: created if
// missing, owned by owner ("<uid>:<gid>"), mode 0755 (pods' users traverse it to the proxyless
// socket). The agent's DaemonSet runs it once, as root with CAP_CHOWN alone, in an init container
// (config/agent): the agent itself runs as an unprivileged user that could not create its socket
// there.
func prepareSocketDir(dir, owner string) error {
	uidText, gidText, ok := strings.Cut(owner, ":")
	uid, uidErr := strconv.Atoi(uidText)
	gid, gidErr := strconv.Atoi(gidText)
	if !ok || uidErr != nil || gidErr != nil || uid < 0 || gid < 0 {
		return fmt.Errorf("--socket-dir-owner %q is not <uid>:<gid>, for example 65532:65532", owner)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.Chown(dir, uid, gid); err != nil {
		return err
	}
	return os.Chmod(dir, 0o755)
}
