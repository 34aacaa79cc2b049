// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Package apply programs internal/capture's rulesets into pods' network namespaces, over netlink
// with github.com/google/nftables (no nft binary at run time): the Applier adopts a namespace's
// table, sends one batch per change holding only the changed set elements and rules, keeps in
// memory what it committed, and repairs a table someone else touched once its cheap check (the
// namespace's ruleset generation) sees it moved. It is the node agent's writer of capture
// (internal/agent wires it next to the xDS publisher); it needs CAP_NET_ADMIN (nftables) and
// CAP_SYS_ADMIN (setns(2), to open a socket in another network namespace).
//
// Not pure: it does I/O, so it is outside depguard's rule pure (which holds internal/capture).
package apply
