//go:build e2e

// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package cluster

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aether-mesh/aether-operator/internal/capture/apply/nstest"
	"github.com/aether-mesh/aether-operator/internal/portspec"
	"github.com/aether-mesh/aether-operator/internal/testenv"
	"github.com/aether-mesh/aether-operator/internal/xds"
)

// A request across the mesh, end to end, through the node's Envoy (config/envoy, deployed by
// hack/cluster/deploy.sh with make images' Envoy image): a meshed client pod GETs its server's
// service at the VIP, on the server's declared HTTP port, with the service's mesh name in Host.
// Capture redirects the connection to 127.0.0.1:18001 in the client's network namespace, where
// the node's Envoy listens (the client's capture listener); its HTTP chain routes the request by
// Host to the cluster of that port, qualified by the client's identity, which opens the upstream
// connection from the client's namespace and speaks TLS with the client's SVID (SDS from the
// agent, which holds it from SPIRE) to the server pod's inbound listener on <pod IP>:18008, pinned
// to the server's SPIFFE ID; the inbound listener checks the client's certificate against the
// mesh's bundle and hands the request to the application on 8080. The server's answer names the
// Host and the path it received (a path chosen at random per run), and the client prints it.
//
// That the answer came through the mesh, and not some other way to the same server, is read from
// the mesh's own records: the node Envoy's counters of the client's cluster (its admin endpoint,
// on its pod's loopback) count the request and a TLS handshake, and the agent's count of the
// access log (aether_agent_requests_total) has the server's proxy log it inbound with the caller's
// SPIFFE ID, which it read from the certificate it verified. Negative control: a client outside
// the mesh sends the same request (Host and path) to the server pod itself and gets the same
// answer, and none of those counts moves: the body alone proves nothing, the counts tell the two
// paths apart.
var _ = Describe("a request across the mesh through the node's Envoy", Ordered, func() {
	const ns = "mesh-bytes"
	ctx := context.Background()
	pod := podBuilder(ns)
	var (
		vip, host, path, url string
		server               *corev1.Pod
		admin                envoyAdmin
	)
	fqdn := xds.FQDN("greeter", ns, "aether.internal")
	cluster := xds.SourceCluster(xds.HTTPCluster(fqdn, 8080), "spiffe://aether.internal/ns/"+ns+"/sa/caller")
	clusterStats := clusterStatsPrefix(cluster)

	BeforeAll(func() {
		freshNamespace(ctx, ns, "greeter", "caller")
		admin = nodeEnvoy(ctx)
		token := make([]byte, 8)
		_, _ = rand.Read(token)
		path = "/across-the-mesh/" + hex.EncodeToString(token)

		server = pod("greeter-0", asManaged, withServiceAccount("greeter"), withPorts("8080"),
			withContainers(corev1.Container{Name: "app", Args: []string{"-http", "8080"}}))
		startPods(ctx, server)
		vip = meshVIP(ctx, ns, "greeter")
		host = fqdn + ":8080"
		url = "http://" + vip + ":8080" + path
	})

	AfterAll(func() {
		_ = k8s.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})

	It("runs the node's Envoy from the image make images built, configured by the agent", func() {
		data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "bin", "images", "envoy.imageid"))
		Expect(err).NotTo(HaveOccurred(), "make images records bin/images/envoy.imageid")
		imageID := strings.TrimSpace(string(data))
		var pods corev1.PodList
		Expect(k8s.List(ctx, &pods, client.InNamespace("aether-operator-system"), client.MatchingLabels{"app.kubernetes.io/name": "aether-envoy"})).To(Succeed())
		Expect(pods.Items).To(HaveLen(1))
		var envoy *corev1.ContainerStatus
		for i, c := range pods.Items[0].Status.ContainerStatuses {
			if c.Name == "envoy" {
				envoy = &pods.Items[0].Status.ContainerStatuses[i]
			}
		}
		Expect(envoy).NotTo(BeNil(), "the Envoy pod has no envoy container status")
		Expect(envoy.Image).To(HavePrefix("docker.io/aether/envoy:v"), "hack/cluster/deploy.sh puts make images' Envoy in place of envoyproxy/envoy")
		Expect(envoy.ImageID).To(Equal(imageID), "the envoy container's image ID")
		Expect(envoy.Ready).To(BeTrue(), "the envoy container is not ready: its /ready (the first configuration from the agent)")
		// The version the binary itself reports, and that it took the agent's configuration
		// (LDS and CDS by ADS: at least one update each, none rejected so far).
		Expect(admin.get("/server_info")).To(ContainSubstring(`"state": "LIVE"`))
		stats := admin.stats("listener_manager", "cluster_manager")
		Expect(stats).To(HaveKeyWithValue("listener_manager.lds.update_rejected", 0), "the node Envoy rejected a listener update:\n%s", admin.diagnosis("-"))
		Expect(stats["listener_manager.lds.update_success"]).To(BeNumerically(">", 0))
		Expect(stats["cluster_manager.cds.update_success"]).To(BeNumerically(">", 0))
	})

	// want is the server's answer to the request, as the client prints it.
	want := func() string { return url + " 200 testapp at " + host + ", HTTP/1.1 " + path + "\n" }

	It("answers a meshed client's request with the server's own answer, through capture, the node's Envoy and mTLS", func() {
		before, beforeLog := admin.stats(clusterStats), accessLogged(ns)
		// The caller declares greeter its upstream (config.aether.io/upstreams), so its cluster is
		// carried up front: this spec is about the bytes, not about on-demand discovery.
		caller := pod("caller", asManaged, withServiceAccount("caller"), withPorts("8080"),
			withAnnotations(map[string]string{portspec.AnnotationUpstreams: "greeter"}), withContainers(
				corev1.Container{Name: "app", Args: []string{"-http", "8080"}},
				corev1.Container{Name: "client", Args: []string{"-get", url, "-get-host", host, "-dial-every", "1s"}}))
		startPods(ctx, caller)
		Eventually(func() (string, error) {
			out, err := clientset().CoreV1().Pods(ns).GetLogs(caller.Name, &corev1.PodLogOptions{Container: "client"}).DoRaw(ctx)
			return string(out), err
		}, 2*time.Minute, time.Second).Should(ContainSubstring(want()),
			"the client's GETs (%s, Host %s) were not answered by the server through the mesh; the node Envoy's view:\n%s", url, host, admin.diagnosis(clusterStats))

		// The client's side: its cluster, the one qualified by its identity, carried the request
		// over TLS. The server's side: its proxy logged the request with the caller's SPIFFE ID,
		// which it read from the certificate it verified (the agent counts the access log).
		callerID := "spiffe://aether.internal/ns/" + ns + "/sa/caller"
		rq, tls, logged := clusterStats+".upstream_rq_200", clusterStats+".ssl.handshake", "inbound "+ns+"/greeter 8080 "+callerID+" 2xx"
		var after map[string]int
		var afterLog map[string]float64
		Eventually(func(g Gomega) {
			after, afterLog = admin.stats(clusterStats), accessLogged(ns)
			g.Expect(after[rq]).To(BeNumerically(">", before[rq]), "cluster %s counted no answered request", cluster)
			g.Expect(after[tls]).To(BeNumerically(">", before[tls]), "cluster %s made no TLS handshake", cluster)
			g.Expect(afterLog[logged]).To(BeNumerically(">", beforeLog[logged]),
				"the server's proxy logged no request from %s (aether_agent_requests_total: %v)", callerID, afterLog)
		}, 30*time.Second, time.Second).Should(Succeed())
		AddReportEntry("a request across the mesh", fmt.Sprintf("GET %s, Host %s: answered %q; cluster %s: answered requests %d → %d, TLS handshakes %d → %d; the server's proxy logged from %s: %v → %v",
			url, host, strings.TrimSpace(strings.TrimPrefix(want(), url+" ")), cluster, before[rq], after[rq], before[tls], after[tls], callerID, beforeLog[logged], afterLog[logged]))
		Expect(k8s.Delete(ctx, caller)).To(Succeed())
		Eventually(func() bool { return k8s.Get(ctx, client.ObjectKeyFromObject(caller), caller) != nil }, time.Minute, time.Second).Should(BeTrue())
	})

	It("gives a client outside the mesh the same answer by another way, which moves none of those counts (negative control)", func() {
		// The VIP answers nothing outside the mesh (its generated Service has no selector: the
		// mesh routes, not kube-proxy), so the client outside dials the server pod itself, with
		// the same Host and path: the same answer, by a way that does not cross the mesh.
		direct := "http://" + server.Status.PodIP + ":8080" + path
		before, beforeLog := admin.stats(clusterStats), accessLogged(ns)
		outsider := pod("outsider", withRestartNever, withContainers(
			corev1.Container{Name: "client", Args: []string{"-get", direct, "-get-host", host}}))
		startPods(ctx, outsider)
		Eventually(func() (string, error) {
			out, err := clientset().CoreV1().Pods(ns).GetLogs(outsider.Name, &corev1.PodLogOptions{Container: "client"}).DoRaw(ctx)
			return string(out), err
		}, time.Minute, time.Second).Should(ContainSubstring(direct+strings.TrimPrefix(want(), url)),
			"the client outside the mesh did not get the server's answer")
		// The access log reaches the agent within its flush interval (a second): watch longer.
		Consistently(func(g Gomega) {
			g.Expect(admin.stats(clusterStats)).To(Equal(before), "the request from outside the mesh went through the node's Envoy")
			g.Expect(accessLogged(ns)).To(Equal(beforeLog), "the node's Envoy logged a request of %s's services", ns)
		}, 3*time.Second, 500*time.Millisecond).Should(Succeed())
	})
})

// clusterStatsPrefix is the prefix of cluster's counters in the node Envoy's /stats, which
// spell a cluster's name with '_' for ':'.
func clusterStatsPrefix(cluster string) string {
	return "cluster." + strings.ReplaceAll(cluster, ":", "_")
}

// accessLogged are the agent's aether_agent_requests_total series of the services of namespace
// ns (what the node's Envoy logged of them), keyed "<direction> <service> <port> <caller>
// <code_class>"; none before the first request.
func accessLogged(ns string) map[string]float64 {
	GinkgoHelper()
	out := map[string]float64{}
	Eventually(func(g Gomega) {
		body := scrapeAgent(g, nodeIP())
		for _, m := range regexp.MustCompile(`(?m)^aether_agent_requests_total\{([^}]*)\} (\S+)$`).FindAllSubmatch(body, -1) {
			labels := map[string]string{}
			for _, l := range regexp.MustCompile(`(\w+)="([^"]*)"`).FindAllSubmatch(m[1], -1) {
				labels[string(l[1])] = string(l[2])
			}
			if !strings.HasPrefix(labels["service"], ns+"/") {
				continue
			}
			v, err := strconv.ParseFloat(string(m[2]), 64)
			g.Expect(err).NotTo(HaveOccurred())
			out[strings.Join([]string{labels["direction"], labels["service"], labels["port"], labels["caller"], labels["code_class"]}, " ")] = v
		}
	}, 30*time.Second, time.Second).Should(Succeed())
	return out
}

// envoyAdmin reads the node Envoy's admin endpoint, which listens on its pod's loopback only
// (127.0.0.1:19000, the agent's bootstrap): from a thread in that pod's network namespace.
type envoyAdmin struct {
	netns string
}

// nodeEnvoy is the admin endpoint of the node's one Envoy, ready.
func nodeEnvoy(ctx context.Context) envoyAdmin {
	GinkgoHelper()
	var pods corev1.PodList
	Eventually(func(g Gomega) {
		g.Expect(k8s.List(ctx, &pods, client.InNamespace("aether-operator-system"),
			client.MatchingLabels{"app.kubernetes.io/name": "aether-envoy"})).To(Succeed())
		g.Expect(pods.Items).To(HaveLen(1), "the node's Envoy pods")
		g.Expect(pods.Items[0].Status.PodIP).NotTo(BeEmpty())
	}, time.Minute, time.Second).Should(Succeed())
	netns := netnsHolding(pods.Items[0].Status.PodIP)
	Expect(netns).NotTo(BeEmpty(), "no network namespace holds the Envoy pod's address %s", pods.Items[0].Status.PodIP)
	return envoyAdmin{netns: netns}
}

// get is the body of the admin endpoint's path. The connection is opened on a thread in the Envoy
// pod's network namespace (a socket belongs to the namespace it was created in), then used from
// here: an http.Client would dial on a goroutine of its own, on any thread.
func (a envoyAdmin) get(path string) string {
	GinkgoHelper()
	c, err := dialIn(a.netns, xds.DefaultAdminAddress)
	Expect(err).NotTo(HaveOccurred(), "the node Envoy's admin endpoint, in %s", a.netns)
	defer func() { _ = c.Close() }()
	Expect(c.SetDeadline(time.Now().Add(10 * time.Second))).To(Succeed())
	req, err := http.NewRequest(http.MethodGet, "http://"+xds.DefaultAdminAddress+path, nil)
	Expect(err).NotTo(HaveOccurred())
	req.Close = true
	Expect(req.Write(c)).To(Succeed())
	resp, err := http.ReadResponse(bufio.NewReader(c), req)
	Expect(err).NotTo(HaveOccurred(), "the node Envoy's admin endpoint %s", path)
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	Expect(err).NotTo(HaveOccurred())
	Expect(resp.StatusCode).To(Equal(http.StatusOK), "the node Envoy's admin endpoint %s: %s", path, body)
	return string(body)
}

// dialIn connects to address from a thread in the network namespace pinned at netns (a socket
// belongs to the namespace it was created in); the connection is then used from any goroutine.
func dialIn(netns, address string) (net.Conn, error) {
	var c net.Conn
	var err error
	if nsErr := (&nstest.NS{Path: netns}).Do(func() { c, err = net.DialTimeout("tcp", address, 5*time.Second) }); nsErr != nil {
		return nil, nsErr
	}
	return c, err
}

// statLine is one line of the admin endpoint's /stats: "<name>: <value>".
var statLine = regexp.MustCompile(`^(\S+): (\d+)$`)

// stats are the node Envoy's counters whose names start with one of prefixes.
func (a envoyAdmin) stats(prefixes ...string) map[string]int {
	GinkgoHelper()
	out := map[string]int{}
	for line := range strings.SplitSeq(a.get("/stats"), "\n") {
		m := statLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		for _, p := range prefixes {
			if strings.HasPrefix(m[1], p+".") {
				out[m[1]], _ = strconv.Atoi(m[2])
			}
		}
	}
	return out
}

// diagnosis is what the node Envoy says about a failed request: its listeners' and clusters'
// states, the updates it rejected, every counter of the cluster involved, and its listeners.
func (a envoyAdmin) diagnosis(clusterStats string) string {
	GinkgoHelper()
	var b strings.Builder
	for line := range strings.SplitSeq(a.get("/stats"), "\n") {
		if strings.HasPrefix(line, "listener_manager.") || strings.Contains(line, "update_rejected") ||
			strings.HasPrefix(line, "cluster_manager.") || strings.HasPrefix(line, clusterStats+".") {
			fmt.Fprintln(&b, line)
		}
	}
	fmt.Fprintln(&b, "listeners:")
	fmt.Fprintln(&b, a.get("/listeners"))
	return b.String()
}
