//go:build e2e

// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package cluster

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1 "github.com/aether-mesh/aether-operator/api/config/v1"
	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/hack/testapp"
	"github.com/aether-mesh/aether-operator/internal/plugin"
	"github.com/aether-mesh/aether-operator/internal/portspec"
	"github.com/aether-mesh/aether-operator/internal/xds"
)

// AccessPolicy authorization end to end on the real node: the meshed server (ServiceAccount
// server, HTTP on 8080, TCP echo on 9000) and two meshed clients, client-a and client-b, each
// running as its own ServiceAccount. Each call is made from a client pod's own network namespace
// (a socket this process opens there, which the pod's capture takes to the node Envoy's capture
// listener of that pod, so it goes out with that pod's SVID), freshly on every poll, so what a
// poll sees is what the mesh does now. Two policies target the server's Service: server-http
// admits client-a on 8080 under /api only, server-tcp admits client-a on 9000. Before they exist
// both clients are served; while they do, client-b is answered 403 access-denied and its TCP
// connection is closed before the echo, and the agent counts its denials; once they are deleted
// client-b is served again.
var _ = Describe("an AccessPolicy on a real node", Ordered, func() {
	const ns = "mesh-access"
	ctx := context.Background()
	pod := podBuilder(ns, asManaged)
	var vip, netnsA, netnsB string
	host := xds.FQDN("server", ns, "aether.internal") + ":8080"
	idA := "spiffe://aether.internal/ns/" + ns + "/sa/client-a"
	idB := "spiffe://aether.internal/ns/" + ns + "/sa/client-b"

	// The callers the policies admit: client-a's ServiceAccount.
	admitted := []configv1.AccessSource{{ServiceAccount: &configv1.ServiceAccountRef{Name: "client-a"}}}
	policy := func(name string, port int32, rule configv1.AccessRule) *configv1.AccessPolicy {
		return &configv1.AccessPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: configv1.AccessPolicySpec{
			TargetRef: &configv1.TargetRef{Kind: "Service", Name: "server"}, Ports: []int32{port}, Rules: []configv1.AccessRule{rule}}}
	}
	// A rule with a path admits nothing on a TCP port (HTTPRuleOnTCPPort): each port its policy.
	httpPolicy := policy("server-http", 8080, configv1.AccessRule{From: admitted, PathPrefixes: []string{"/api"}})
	tcpPolicy := policy("server-tcp", 9000, configv1.AccessRule{From: admitted})

	// get is the answer line (testapp.RequestOnce's) of GET path on the server's HTTP port from
	// the pod whose network namespace is netns.
	get := func(netns, path string) string {
		return testapp.Request(clientIn(netns), http.MethodGet, "http://"+vip+":8080"+path, host)
	}
	// echo sends a line to the server's TCP port from netns and returns what came back.
	echo := func(netns string) (string, error) { return echoFrom(netns, vip+":9000", "ping from the client\n") }
	served := func(g Gomega, netns, who string) {
		g.Expect(get(netns, "/api/orders")).To(HavePrefix("200 testapp at "+host), "%s's GET /api/orders", who)
		got, err := echo(netns)
		g.Expect(err).NotTo(HaveOccurred(), "%s's TCP echo", who)
		g.Expect(got).To(Equal("ping from the client\n"), "%s's TCP echo", who)
	}
	// denied reads the agent's aether_agent_access_denied_total of caller on the server's port
	// (its labels as the exposition sorts them); 0 before any denial.
	denied := func(g Gomega, caller, port, protocol string) float64 {
		sum, _ := agentSum(g, "aether_agent_access_denied_total", fmt.Sprintf(`^caller="%s",port="%s",protocol="%s",service="%s/server"$`,
			regexp.QuoteMeta(caller), port, protocol, ns))
		return sum
	}
	policies := func(g Gomega) map[int32][]string {
		ms := &meshv1alpha1.MeshService{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "server"}, ms)).To(Succeed())
		out := map[int32][]string{}
		for _, p := range ms.Status.Ports {
			out[p.Port] = p.AccessPolicies
		}
		return out
	}

	BeforeAll(func() {
		freshNamespace(ctx, ns, "server", "client-a", "client-b")
		// The clients declare the server their upstream, so their clusters are carried up front.
		client := func(sa string) *corev1.Pod {
			return pod(sa, withServiceAccount(sa), withPorts("8080"),
				withAnnotations(map[string]string{portspec.AnnotationUpstreams: "server"}),
				withContainers(corev1.Container{Name: "app", Args: []string{"-http", "8080"}}))
		}
		a, b := client("client-a"), client("client-b")
		startPods(ctx, pod("server-0", withServiceAccount("server"), withPorts("8080,9000=tcp"),
			withContainers(corev1.Container{Name: "app", Args: []string{"-http", "8080", "-tcp", "9000"}})), a, b)
		vip = meshVIP(ctx, ns, "server")
		netnsA, netnsB = netnsHolding(a.Status.PodIP), netnsHolding(b.Status.PodIP)
		Expect(netnsA).NotTo(BeEmpty(), "no network namespace holds client-a's address %s", a.Status.PodIP)
		Expect(netnsB).NotTo(BeEmpty(), "no network namespace holds client-b's address %s", b.Status.PodIP)
	})

	AfterAll(func() {
		_ = k8s.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})

	It("serves both clients, on HTTP and TCP, while no policy governs the server's ports", func() {
		Eventually(func(g Gomega) {
			g.Expect(policies(g)).To(Equal(map[int32][]string{8080: nil, 9000: nil}), "the server's ports are governed")
			served(g, netnsA, "client-a")
			served(g, netnsB, "client-b")
		}, 2*time.Minute, time.Second).Should(Succeed())
	})

	It("admits only client-a once the policies are Accepted: client-b is answered 403 access-denied, its TCP connection closed before the echo, and counted", func() {
		httpBefore, tcpBefore := denied(Default, idB, "8080", "http"), denied(Default, idB, "9000", "tcp")
		applied := time.Now()
		Expect(k8s.Create(ctx, httpPolicy)).To(Succeed())
		Expect(k8s.Create(ctx, tcpPolicy)).To(Succeed())
		Eventually(func(g Gomega) {
			for _, p := range []*configv1.AccessPolicy{httpPolicy, tcpPolicy} {
				got := &configv1.AccessPolicy{}
				g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(p), got)).To(Succeed())
				accepted := meshCondition(got.Status.Conditions, configv1.AccessConditionAccepted)
				g.Expect(accepted.Status).To(Equal(metav1.ConditionTrue), "%s: Accepted %s %s", p.Name, accepted.Reason, accepted.Message)
				resolved := meshCondition(got.Status.Conditions, configv1.AccessConditionResolvedRefs)
				g.Expect(resolved.Status).To(Equal(metav1.ConditionTrue), "%s: ResolvedRefs %s %s", p.Name, resolved.Reason, resolved.Message)
			}
			g.Expect(policies(g)).To(Equal(map[int32][]string{8080: {ns + "/server-http"}, 9000: {ns + "/server-tcp"}}),
				"the policies the MeshService lists on each port")
		}, time.Minute, 500*time.Millisecond).Should(Succeed())

		// client-b: the mesh's own 403 on HTTP; on TCP the connection closes (not a timeout) with
		// no byte of the echo.
		Eventually(func(g Gomega) {
			g.Expect(get(netnsB, "/api/orders")).To(HavePrefix("403 x-aether-error=access-denied "), "client-b's GET /api/orders")
			got, err := echo(netnsB)
			g.Expect(got).To(BeEmpty(), "client-b's TCP connection echoed")
			g.Expect(closedByPeer(err)).To(BeTrue(), "client-b's TCP connection was not closed by the mesh: %v", err)
		}, time.Minute, 500*time.Millisecond).Should(Succeed())
		enforced := time.Since(applied)
		// client-a: under /api, and its TCP echo; outside /api, no rule admits it either.
		Eventually(func(g Gomega) {
			served(g, netnsA, "client-a")
			g.Expect(get(netnsA, "/admin")).To(HavePrefix("403 x-aether-error=access-denied "), "client-a's GET /admin, outside /api")
		}, 30*time.Second, 500*time.Millisecond).Should(Succeed())

		// The agent counts client-b's denials, by protocol, from the server proxy's access log.
		var httpAfter, tcpAfter float64
		Eventually(func(g Gomega) {
			httpAfter, tcpAfter = denied(g, idB, "8080", "http"), denied(g, idB, "9000", "tcp")
			g.Expect(httpAfter).To(BeNumerically(">", httpBefore), "client-b's HTTP denials")
			g.Expect(tcpAfter).To(BeNumerically(">", tcpBefore), "client-b's TCP denials")
		}, 30*time.Second, time.Second).Should(Succeed())
		Expect(denied(Default, idA, "9000", "tcp")).To(BeZero(), "client-a's TCP connections denied")
		AddReportEntry("access policy", fmt.Sprintf("enforced %s after it was applied; aether_agent_access_denied_total of %s: http %v → %v, tcp %v → %v",
			enforced.Round(time.Millisecond), idB, httpBefore, httpAfter, tcpBefore, tcpAfter))
	})

	It("has kubectl aether dial --from client-b report its calls denied, and client-a's admitted", func() {
		dial := func(spelling, from string) (plugin.DialReport, error) {
			out, err := kubectlAether(ctx, "dial", spelling, "--from", ns+"/"+from, "-o", "json")
			// The report, then whatever the command says after it.
			var report plugin.DialReport
			Expect(json.NewDecoder(strings.NewReader(out)).Decode(&report)).To(Succeed(), out)
			Expect(report.Access).NotTo(BeNil(), out)
			return report, err
		}
		httpURL, tcpAddress := "http://server."+ns+":8080/api/orders", "server."+ns+":9000"
		for spelling, policy := range map[string]string{httpURL: "server-http", tcpAddress: "server-tcp"} {
			report, err := dial(spelling, "client-b")
			Expect(err).To(MatchError(ContainSubstring("%s from %s is denied by the AccessPolicies", spelling, idB)))
			Expect(report.Access.Caller).To(Equal(idB))
			Expect(report.Access.Admitted).To(HaveValue(BeFalse()), "%s from client-b", spelling)
			Expect(report.Access.Policies).To(Equal([]string{ns + "/" + policy}))

			report, err = dial(spelling, "client-a")
			Expect(err).NotTo(HaveOccurred(), "%s from client-a", spelling)
			Expect(report.Access.Admitted).To(HaveValue(BeTrue()), "%s from client-a", spelling)
			Expect(report.Access.Rule).To(Equal(ns + "/" + policy + "#0"))
		}
		out, err := kubectlAether(ctx, "dial", httpURL, "--from", ns+"/client-b")
		Expect(err).To(HaveOccurred())
		Expect(out).To(ContainSubstring("Access:     denied: governed by %s/server-http, and no rule admits %s (GET /api/orders)", ns, idB))
	})

	It("serves client-b again once the policies are deleted", func() {
		deleted := time.Now()
		for _, p := range []*configv1.AccessPolicy{httpPolicy, tcpPolicy} {
			Expect(k8s.Delete(ctx, p)).To(Succeed())
		}
		Eventually(func(g Gomega) {
			for _, p := range []*configv1.AccessPolicy{httpPolicy, tcpPolicy} {
				g.Expect(apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(p), &configv1.AccessPolicy{}))).To(BeTrue())
			}
			g.Expect(policies(g)).To(Equal(map[int32][]string{8080: nil, 9000: nil}), "the server's ports are still governed")
			served(g, netnsB, "client-b")
			served(g, netnsA, "client-a")
		}, time.Minute, 500*time.Millisecond).Should(Succeed())
		AddReportEntry("access policy deleted", fmt.Sprintf("client-b served again %s after the delete", time.Since(deleted).Round(time.Millisecond)))
	})
})

// clientIn is an HTTP client whose every connection is opened from the network namespace netns
// (a pod's: its capture takes it), one per request.
func clientIn(netns string) *http.Client {
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil,
		DialContext: func(_ context.Context, _, address string) (net.Conn, error) { return dialIn(netns, address) }}}
}

// echoFrom connects to address from netns, sends line and returns what came back up to its first
// newline, and the error that ended the read: nil when a whole line came back.
func echoFrom(netns, address, line string) (string, error) {
	c, err := dialIn(netns, address)
	if err != nil {
		return "", err
	}
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, line); err != nil {
		return "", err
	}
	return bufio.NewReader(c).ReadString('\n')
}

// closedByPeer is whether err ends a read because the other side closed or reset the connection,
// not because the read timed out.
func closedByPeer(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return false
	}
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)
}
