// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xds_test

import (
	"net/netip"
	"testing"

	"github.com/aether-mesh/aether-operator/internal/resolve"
	"github.com/aether-mesh/aether-operator/internal/xds"
	"github.com/aether-mesh/aether-operator/internal/xds/xdssim"
	"github.com/aether-mesh/aether-operator/internal/xds/xdstest"
)

// The mesh's HTTP proxy port as HTTP_PROXY. The workload page: apps "can instead use the mesh's
// HTTP proxy port ... with the mesh FQDN and port in the Host header, or as an HTTP proxy
// (HTTP_PROXY)", and "a name that is not a mesh service is not the mesh's: on the proxy port it
// answers 404". An HTTP proxy client sends absolute-form requests (RFC 9112 section 3.2.2: the
// URL's authority wins over a Host that disagrees); the upstream request is origin-form. CONNECT
// is refused (403): the proxy port carries plain HTTP and the mesh originates TLS itself. The
// expectations are written from those sentences (clusters by their names, statuses and
// x-aether-error values as literals), not read from internal/resolve or the builder.
func TestProxyPortAsHTTPProxy(t *testing.T) {
	m := bareNameMesh(false)
	sim := xdssim.New(build(t, m))
	if err := sim.Check(); err != nil {
		t.Fatalf("Envoy would reject the configuration: %v", err)
	}
	// Two ways in: HTTP_PROXY=http://127.0.0.1:18081, whatever listens there in the client's
	// network namespace, and a captured connection to a mesh name's port 18081.
	netns := ""
	for _, p := range m.Pods {
		if xds.PodKey(p.Namespace, p.Name) == webClient {
			netns = p.NetNS
		}
	}
	loopback, ok := sim.ListenerAt(netns, netip.MustParseAddrPort("127.0.0.1:18081"))
	if !ok {
		t.Fatalf("nothing listens at 127.0.0.1:18081 in %s's network namespace %q: HTTP_PROXY=http://127.0.0.1:18081 is refused", webClient, netns)
	}
	ways := []xdssim.Conn{
		{Listener: loopback, DstIP: "127.0.0.1", DstPort: 18081, SrcIP: "127.0.0.1", SrcPort: 40000},
		{Listener: xds.CaptureListener(webClient), DstIP: shopVIP, DstPort: 18081},
	}
	const mesh = "payments.shop.aether.internal"
	for _, c := range []struct {
		name    string
		req     xdssim.Request
		cluster string // the cluster the request reaches, with path, or
		path    string
		status  int    // the answer, with
		meshErr string // its x-aether-error ("" for Envoy's own)
	}{
		{name: "origin-form, mesh name and port in Host", req: xdssim.Request{Host: mesh + ":8080", Path: "/x"},
			cluster: shopCluster(8080, webClient), path: "/x"},
		{name: "absolute-form mesh URL", req: xdssim.Request{Host: mesh + ":8080", Path: "http://" + mesh + ":8080/x"},
			cluster: shopCluster(8080, webClient), path: "/x"},
		{name: "absolute-form with a query", req: xdssim.Request{Host: mesh + ":9090", Path: "http://" + mesh + ":9090/x?a=1"},
			cluster: shopCluster(9090, webClient), path: "/x?a=1"},
		{name: "absolute-form Kubernetes name", req: xdssim.Request{Host: "payments.shop.svc.cluster.local:8080",
			Path: "http://payments.shop.svc.cluster.local:8080/x"}, cluster: shopCluster(8080, webClient), path: "/x"},
		{name: "absolute-form without a path", req: xdssim.Request{Host: mesh + ":8080", Path: "http://" + mesh + ":8080"},
			cluster: shopCluster(8080, webClient), path: "/"},
		{name: "Host disagrees with the URL: the URL wins", req: xdssim.Request{Host: "example.com", Path: "http://" + mesh + ":8080/x"},
			cluster: shopCluster(8080, webClient), path: "/x"},
		{name: "Host names the mesh, the URL does not: the URL wins", req: xdssim.Request{Host: mesh + ":8080", Path: "http://example.com/x"},
			status: 404, meshErr: "not-mesh-name"},
		{name: "absolute-form non-mesh host", req: xdssim.Request{Host: "example.com", Path: "http://example.com/x"},
			status: 404, meshErr: "not-mesh-name"},
		{name: "origin-form non-mesh host", req: xdssim.Request{Host: "example.com:8080", Path: "/x"},
			status: 404, meshErr: "not-mesh-name"},
		{name: "absolute-form mesh URL of a TCP port", req: xdssim.Request{Host: mesh + ":9000", Path: "http://" + mesh + ":9000/x"},
			status: 421, meshErr: "port-not-http"},
		{name: "CONNECT to a mesh name", req: xdssim.Request{Method: "CONNECT", Host: mesh + ":8080"}, status: 403},
		{name: "CONNECT to another host", req: xdssim.Request{Method: "CONNECT", Host: "example.com:443"}, status: 403},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, conn := range ways {
				req := c.req
				conn.HTTP = &req
				out := sim.Dial(conn)
				if c.cluster != "" {
					if out.Verdict != xdssim.Forwarded || len(out.Targets) != 1 || out.Targets[0].Cluster != c.cluster || out.Path != c.path {
						t.Errorf("%s %s (Host %q) to %s:%d: %s, path %q; want cluster %s, path %q", req.Method, req.Path, req.Host,
							conn.DstIP, conn.DstPort, out, out.Path, c.cluster, c.path)
					}
					continue
				}
				if out.Verdict != xdssim.Answered || out.Response.Status != c.status || out.Response.Header("x-aether-error") != c.meshErr {
					t.Errorf("%s %s (Host %q) to %s:%d: %s; want %d with x-aether-error %q", req.Method, req.Path, req.Host,
						conn.DstIP, conn.DstPort, out, c.status, c.meshErr)
				}
				// The 404's words are resolve's, as every answer of the mesh's.
				if c.status == 404 {
					if err := xdssim.Agrees(out, resolve.NotMeshName(xdstest.Domain), ""); err != nil {
						t.Errorf("%s %s (Host %q): %v", req.Method, req.Path, req.Host, err)
					}
				}
			}
		})
	}
}
