// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"fmt"
	"strings"
	"testing"

	"github.com/miekg/dns"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aether-mesh/aether-operator/internal/capture/apply"
	"github.com/aether-mesh/aether-operator/internal/capture/apply/nstest"
	"github.com/aether-mesh/aether-operator/internal/portspec"
	"github.com/aether-mesh/aether-operator/internal/testenv"
)

// withMeshDNS is withCapture with the mesh DNS on.
func withMeshDNS(applier *apply.Applier) func(*XDSOptions) {
	return func(o *XDSOptions) {
		withCapture(applier)(o)
		o.Capture.DNS = &DNSOptions{}
	}
}

// lookup asks, from pns, any resolver (127.0.0.53:53: capture takes every port-53 query, whatever
// its address) for name's A record; the answer's rcode and addresses, or an error.
func lookup(pns *nstest.NS, name string) (int, []string, error) {
	q := new(dns.Msg)
	q.SetQuestion(dns.Fqdn(name), dns.TypeA)
	var reply *dns.Msg
	var err error
	if doErr := pns.Do(func() { reply, err = dns.Exchange(q, "127.0.0.53:53") }); doErr != nil {
		return 0, nil, doErr
	}
	if err != nil {
		return 0, nil, err
	}
	var addrs []string
	for _, rr := range reply.Answer {
		if a, ok := rr.(*dns.A); ok {
			addrs = append(addrs, a.A.String())
		}
	}
	return reply.Rcode, addrs, nil
}

// resolvesTo waits until name answers want from pns (NXDOMAIN when want is empty).
func resolvesTo(t *testing.T, pns *nstest.NS, name, want string) {
	t.Helper()
	testenv.Eventually(t, fmt.Sprintf("%s resolves to %q in the pod", name, want), func() error {
		rcode, addrs, err := lookup(pns, name)
		switch {
		case err != nil:
			return err
		case want == "" && rcode != dns.RcodeNameError:
			return fmt.Errorf("rcode %s, %v", dns.RcodeToString[rcode], addrs)
		case want != "" && (rcode != dns.RcodeSuccess || len(addrs) != 1 || addrs[0] != want):
			return fmt.Errorf("rcode %s, %v", dns.RcodeToString[rcode], addrs)
		}
		return nil
	})
}

func dnsQueriesTotal(t *testing.T, outcome string) float64 {
	t.Helper()
	n, err := testenv.Counter("aether_agent_dns_queries_total", "outcome", outcome)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestMeshDNS: an agent with the mesh DNS serves it in a meshed pod's namespace once the pod is
// handed over: its service's mesh name answers the VIP (counted), a service that appears is
// answered as soon as its MeshService has a VIP (the informer feeds the answers; no rebuild), and
// the pod opting out (aether.io/mesh-dns: "false") loses its DNS rules.
func TestMeshDNS(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t, ctx)
	a := startXDSAgent(t, ns, withMeshDNS(apply.New()))
	pod := createPod(t, ctx, ns, "client", a.node, newPodIP(), true, paymentsAnnotations())
	vip := serviceVIP(t, ctx, ns, "payments")
	pns := nstest.NewNamed(t, "dns", vip)
	mesh := dnsQueriesTotal(t, "mesh")
	if err := a.options.XDS.NetNS.Record(pod.UID, pns.Path); err != nil {
		t.Fatal(err)
	}
	resolvesTo(t, pns, "payments."+ns+".aether.internal", vip)
	if n := dnsQueriesTotal(t, "mesh"); n <= mesh {
		t.Errorf("aether_agent_dns_queries_total{outcome=mesh} is %v, was %v", n, mesh)
	}

	t.Run("a new service is answered once it has a VIP", func(t *testing.T) {
		ledgerName := "ledger." + ns + ".aether.internal"
		if rcode, addrs, err := lookup(pns, ledgerName); err != nil || rcode != dns.RcodeNameError {
			t.Fatalf("before ledger exists: rcode %s, %v, %v; want NXDOMAIN", dns.RcodeToString[rcode], addrs, err)
		}
		createPodAs(t, ctx, ns, "ledger-0", "ledger", a.node, newPodIP(), true, map[string]string{portspec.AnnotationPort: "8080"})
		resolvesTo(t, pns, ledgerName, serviceVIP(t, ctx, ns, "ledger"))
	})

	t.Run("opting out removes the DNS rules", func(t *testing.T) {
		patch := client.MergeFrom(pod.DeepCopy())
		pod.Annotations[portspec.AnnotationMeshDNS] = portspec.MeshDNSOff
		if err := env.Client.Patch(ctx, pod, patch); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, "no DNS rule in the pod's table", func() error {
			if rules := pns.Nft(t, "list", "chain", "inet", "aether", "output"); strings.Contains(rules, "dport 53") {
				return fmt.Errorf("the chain still has DNS rules")
			}
			return nil
		})
		if _, _, err := lookup(pns, "payments."+ns+".aether.internal"); err == nil {
			t.Error("a query from a pod without mesh DNS was answered; nothing listens on 127.0.0.53:53 there")
		}
	})
}
