// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xds_test

import (
	"maps"
	"slices"
	"testing"

	"github.com/aether-mesh/aether-operator/internal/xds"
	"github.com/aether-mesh/aether-operator/internal/xds/xdstest"
)

// spell is the name the builder's helpers give t: ParseCluster's exact inverse.
func spell(t xds.ClusterTarget) string {
	switch {
	case t.Inbound:
		return xds.AppCluster(t.Pod, t.Port)
	case t.TCP && t.Port == 0:
		return xds.TCPDefaultCluster(t.FQDN) + "|" + t.SourceKey
	case t.TCP:
		return xds.TCPCluster(t.FQDN, t.Port) + "|" + t.SourceKey
	}
	return xds.HTTPCluster(t.FQDN, t.Port) + "|" + t.SourceKey
}

// TestParseClusterReadsEveryBuiltName: every cluster every scenario builds, and every app cluster
// its inbound listeners name, reads back (ParseCluster) into parts the builder's helpers spell
// into the same name; its FQDN reads back (ParseFQDN) into a service of the mesh, and its source
// key into a local identity (SourceIdentity). Only the passthrough and the blackhole are not
// targets.
func TestParseClusterReadsEveryBuiltName(t *testing.T) {
	scenarios := xdstest.All()
	for _, name := range slices.Sorted(maps.Keys(scenarios)) {
		t.Run(name, func(t *testing.T) {
			m := scenarios[name]
			res := build(t, m)
			services := map[[2]string]bool{}
			for _, s := range m.Services {
				services[[2]string{s.Namespace, s.Name}] = true
			}
			identities := map[string]bool{}
			for _, p := range m.Pods {
				identities[p.Identity] = true
				for _, pp := range p.Ports {
					app := xds.AppCluster(xds.PodKey(p.Namespace, p.Name), pp.Port)
					target, ok := xds.ParseCluster(app)
					if !ok || !target.Inbound || target.Pod != xds.PodKey(p.Namespace, p.Name) || target.Port != pp.Port || spell(target) != app {
						t.Errorf("ParseCluster(%q) = %+v, %v", app, target, ok)
					}
				}
			}
			for _, c := range res.Clusters {
				target, ok := xds.ParseCluster(c.GetName())
				if c.GetName() == xds.PassthroughCluster || c.GetName() == xds.BlackholeCluster {
					if ok {
						t.Errorf("ParseCluster(%q) = %+v: not a target", c.GetName(), target)
					}
					continue
				}
				if !ok || spell(target) != c.GetName() {
					t.Errorf("ParseCluster(%q) = %+v, %v: spelled back %q", c.GetName(), target, ok, spell(target))
					continue
				}
				if target.Inbound {
					continue // read above, from the pods
				}
				svc, ns, ok := xds.ParseFQDN(target.FQDN, m.Domain)
				if !ok || !services[[2]string{ns, svc}] || xds.FQDN(svc, ns, m.Domain) != target.FQDN {
					t.Errorf("cluster %q: ParseFQDN(%q) = %q, %q, %v: no service of the mesh", c.GetName(), target.FQDN, svc, ns, ok)
				}
				id, ok := xds.SourceIdentity(m.Domain, target.SourceKey)
				if !ok || !identities[id] {
					t.Errorf("cluster %q: SourceIdentity(%q) = %q, %v: no local identity", c.GetName(), target.SourceKey, id, ok)
				}
			}
		})
	}
}

// TestParseClusterRefusesOtherNames: a name of no builder's shape is not a target, whatever
// parts of one it has.
func TestParseClusterRefusesOtherNames(t *testing.T) {
	for _, name := range []string{
		"", "passthrough", "blackhole", "aether-xds", "app|", "app|shop/payments-0", "app|shop/payments-0:0",
		"app|shop/payments-0:65536", "app|shop/payments-0:08080", "app|payments-0:8080", "app|/p:8080", "app|a/b/c:80",
		"payments.shop.aether.internal:8080", "payments.shop.aether.internal|web/frontend", "|web/frontend",
		"payments.shop.aether.internal:8080|web", "payments.shop.aether.internal:8080|web/a/b", "payments.shop.aether.internal:x|web/frontend",
		"tcp:|web/frontend", ":8080|web/frontend", "payments.shop.aether.internal:-1|web/frontend",
	} {
		if target, ok := xds.ParseCluster(name); ok {
			t.Errorf("ParseCluster(%q) = %+v, want no target", name, target)
		}
	}
	for _, tc := range []struct{ fqdn, domain string }{
		{"payments.shop.other.domain", "aether.internal"}, {"shop.aether.internal", "aether.internal"},
		{".shop.aether.internal", "aether.internal"}, {"payments..aether.internal", "aether.internal"},
	} {
		if svc, ns, ok := xds.ParseFQDN(tc.fqdn, tc.domain); ok {
			t.Errorf("ParseFQDN(%q, %q) = %q, %q: want none", tc.fqdn, tc.domain, svc, ns)
		}
	}
	if svc, ns, ok := xds.ParseFQDN(xds.FQDN("api.v2", "shop", "aether.internal"), "aether.internal"); !ok || svc != "api.v2" || ns != "shop" {
		t.Errorf("a dotted service name reads back as %q, %q, %v", svc, ns, ok)
	}
	for _, key := range []string{"web", "web/", "/frontend", "web/a/b", "web/sa/frontend"} {
		if id, ok := xds.SourceIdentity("aether.internal", key); ok {
			t.Errorf("SourceIdentity(%q) = %q: want none", key, id)
		}
	}
}
