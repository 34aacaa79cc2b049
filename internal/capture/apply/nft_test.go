// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package apply_test

import (
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/aether-mesh/aether-operator/internal/capture"
	"github.com/aether-mesh/aether-operator/internal/capture/apply"
	"github.com/aether-mesh/aether-operator/internal/capture/apply/nstest"
	"github.com/aether-mesh/aether-operator/internal/golden"
	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/xds/xdstest"
)

// commentRE is the comment the applier gives each rule (its text, its identity).
var commentRE = regexp.MustCompile(` comment "[^"]*"`)

// listing is nft's own rendering of ns's table, the applier's comments dropped, its sets and
// chains sorted: nft lists them in the order they were made, which a table changed over time
// (a set added by a later batch) does not share with one loaded whole.
func listing(t testing.TB, ns *nstest.NS) string {
	t.Helper()
	text := commentRE.ReplaceAllString(ns.Nft(t, "list", "table", "inet", "aether"), "")
	head, body, ok := strings.Cut(text, "\n")
	if !ok {
		return text
	}
	blocks := strings.Split(strings.TrimSuffix(strings.TrimRight(body, "\n"), "}"), "\n\n")
	for i := range blocks {
		blocks[i] = strings.TrimRight(blocks[i], "\n")
	}
	slices.Sort(blocks)
	return head + "\n" + strings.Join(blocks, "\n\n") + "\n}\n"
}

// loadText loads a ruleset's text into ns with nft -f: what nft makes of the same words.
func loadText(t testing.TB, ns *nstest.NS, text string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "ruleset.nft")
	if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	ns.Nft(t, "-f", file)
}

// TestAgreesWithNft: what the applier programs over netlink is what nft itself programs from
// the ruleset's text (Ruleset.String, the golden files' language): nft lists the two tables the
// same, byte for byte (the applier's rule comments aside). nft is a reader this package did not
// write: a wrong register, offset, byte order or flag in the applier's expressions lists as
// another rule. The negative control is a ruleset whose text says one port and whose set holds
// another, which the comparison must catch.
func TestAgreesWithNft(t *testing.T) {
	m := xdstest.MixedHTTPPrimary()
	uid := uint32(1337)
	for _, mode := range model.CaptureModes {
		t.Run(string(mode), func(t *testing.T) {
			viaNetlink, viaNft := nstest.New(t), nstest.New(t)
			pod := clientPod(t, m, mode, viaNetlink)
			pod.ExcludeOutboundPorts = []int32{5432, 6379}
			node := []netip.Addr{netip.MustParseAddr("10.244.1.1"), netip.MustParseAddr("2001:db8::7")}
			want := capture.Build(dualStack(m), pod, capture.Options{ProxyUID: &uid, Node: node})
			sync(t, apply.New(), viaNetlink, want)
			loadText(t, viaNft, want.String())
			if a, b := listing(t, viaNetlink), listing(t, viaNft); a != b {
				t.Errorf("nft lists the applier's table otherwise than its own (-nft +applier):\n%s", golden.Diff(b, a))
			}
		})
	}
	t.Run("negative control: another element", func(t *testing.T) {
		viaNetlink, viaNft := nstest.New(t), nstest.New(t)
		want := capture.Build(m, clientPod(t, m, model.CaptureSurface, viaNetlink), capture.Options{})
		sync(t, apply.New(), viaNetlink, want)
		loadText(t, viaNft, strings.Replace(want.String(), "10.96.0.10 . 9000", "10.96.0.10 . 9001", 1))
		a, b := listing(t, viaNetlink), listing(t, viaNft)
		if a == b {
			t.Fatal("two tables of different elements list the same")
		}
		t.Logf("caught:\n%s", golden.Diff(b, a))
	})
}

// dualStack is m with a service of an IPv6 VIP added (payments-v6, payments' ports), so that
// surface6 has elements too.
func dualStack(m model.Mesh) model.Mesh {
	m.Services = append([]model.Service(nil), m.Services...)
	for _, s := range m.Services {
		if s.Name == "payments" {
			s.Name, s.VIP = "payments-v6", "fd00:10:96::10"
			m.Services = append(m.Services, s)
			break
		}
	}
	return m
}
