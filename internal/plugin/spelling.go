// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package plugin

import (
	"cmp"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/resolve"
)

// Spelling is what a client dials, as kubectl aether dial reads it.
type Spelling struct {
	// Written is the spelling as given (the argument, or --host's value).
	Written string `json:"written"`
	// Host is the name the client dials or, for an HTTP request, the Host header's host: it names
	// the service.
	Host string `json:"host"`
	// HTTP is true for an HTTP request (http://, or --host through the proxy port); Authority is
	// then its Host header, host[:port] as written.
	HTTP      bool   `json:"http,omitempty"`
	Authority string `json:"authority,omitempty"`
	// TLS is true for https:// to port 443: TLS the application terminates.
	TLS bool `json:"tls,omitempty"`
	// Path is an http:// request's path ("/" when none is written), without its query: what an
	// AccessPolicy's path rules read.
	Path string `json:"path,omitempty"`
	// Port is the port a connection dials (not an HTTP request's: its authority says).
	Port int32 `json:"port,omitempty"`
	// UDP is true for datagrams to Port (<name>:<port>/udp), not a TCP connection.
	UDP bool `json:"udp,omitempty"`
	// Proxied is true for a request through the mesh's HTTP proxy port (--host); ProxyHost is the
	// name it connects to on that port, empty for the pod's own proxy on 127.0.0.1.
	Proxied   bool   `json:"proxied,omitempty"`
	ProxyHost string `json:"proxyHost,omitempty"`
}

// ParseSpelling reads a client spelling: http://<name>[:<port>]/..., https://<name>[:<port>]/,
// <name>:<port>, <name>:<port>/udp (datagrams, as the dial surface spells them), or with hostHeader (--host) an HTTP request through the mesh's HTTP proxy port
// 18081 whose Host header is hostHeader (arg, if given, must then dial port 18081).
func ParseSpelling(arg, hostHeader string) (Spelling, error) {
	if hostHeader != "" {
		return parseProxied(arg, hostHeader)
	}
	if arg == "" {
		return Spelling{}, fmt.Errorf("dial needs a spelling, as in http://payments.shop/ or payments.shop:9000, or --host payments.shop:8080")
	}
	scheme, _, hasScheme := strings.Cut(arg, "://")
	if !hasScheme {
		host, port, ok := strings.Cut(arg, ":")
		if !ok {
			return Spelling{}, fmt.Errorf("%q has no port and no scheme: write http://%s/ for an HTTP request, or %s:<port> for a connection", arg, arg, arg)
		}
		port, udp := strings.CutSuffix(port, resolve.UDPSuffix)
		n, err := portNumber(arg, port)
		if err != nil {
			return Spelling{}, err
		}
		return Spelling{Written: arg, Host: host, Port: n, UDP: udp}, nil
	}
	u, err := url.Parse(arg)
	if err != nil || u.Host == "" {
		return Spelling{}, fmt.Errorf("%q is not a URL with a host: write %s://<service>.<namespace>/", arg, scheme)
	}
	switch strings.ToLower(scheme) {
	case "http":
		return Spelling{Written: arg, Host: hostOf(u.Host), HTTP: true, Authority: u.Host, Path: cmp.Or(u.EscapedPath(), "/")}, nil
	case "https":
		port := u.Port()
		if port == "" || port == strconv.Itoa(int(resolve.HTTPSPort)) {
			return Spelling{Written: arg, Host: u.Hostname(), TLS: true}, nil
		}
		n, err := portNumber(arg, port) // TLS to another port is a connection to that port
		if err != nil {
			return Spelling{}, err
		}
		return Spelling{Written: arg, Host: u.Hostname(), Port: n}, nil
	}
	return Spelling{}, fmt.Errorf("%q: unknown scheme %q: the mesh carries http://, https:// (TLS the application terminates) and <name>:<port>", arg, scheme)
}

// parseProxied is --host: an HTTP request with that Host header, sent to the mesh's HTTP proxy
// port. The Host names the service.
func parseProxied(arg, hostHeader string) (Spelling, error) {
	proxyHost := ""
	if arg != "" {
		to, err := ParseSpelling(arg, "")
		proxyHost = to.Host
		if err == nil && to.HTTP {
			_, port, _ := strings.Cut(to.Authority, ":")
			to.Port, err = portNumber(arg, port)
		}
		if err != nil || to.Port != meshv1alpha1.MeshHTTPPort {
			return Spelling{}, fmt.Errorf("--host is the Host header of a request through the mesh's HTTP proxy port %d: dial <name>:%d, or give --host alone (%q is not port %d)",
				meshv1alpha1.MeshHTTPPort, meshv1alpha1.MeshHTTPPort, arg, meshv1alpha1.MeshHTTPPort)
		}
	}
	return Spelling{Written: "Host: " + hostHeader, Host: hostOf(hostHeader), HTTP: true, Authority: hostHeader,
		Proxied: true, ProxyHost: proxyHost}, nil
}

// hostOf is an authority's host: before its only colon (a malformed authority is resolve's to
// answer, with 400).
func hostOf(authority string) string {
	host, _, _ := strings.Cut(authority, ":")
	return host
}

func portNumber(arg, port string) (int32, error) {
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 || port[0] == '0' {
		return 0, fmt.Errorf("%q: the port %q is not a number from 1 to 65535", arg, port)
	}
	return int32(n), nil
}

// ServiceRef is the MeshService a host names.
type ServiceRef struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
}

// ServiceOf reads which service host names: <service>.<namespace>.<meshDomain>,
// <service>.<namespace>.svc.cluster.local, <service>.<namespace> (resolve.Names), or <service>
// alone, meaning namespace (the caller's, as the cluster's DNS search makes it).
func ServiceOf(host, namespace, meshDomain string) (ServiceRef, error) {
	name := strings.TrimSuffix(strings.ToLower(host), ".")
	for _, suffix := range []string{"." + strings.ToLower(meshDomain), ".svc.cluster.local"} {
		if trimmed, ok := strings.CutSuffix(name, suffix); ok {
			name = trimmed
			break
		}
	}
	parts := strings.Split(name, ".")
	switch {
	case len(parts) == 1 && parts[0] != "":
		return ServiceRef{Name: parts[0], Namespace: namespace}, nil
	case len(parts) == 2 && parts[0] != "" && parts[1] != "":
		return ServiceRef{Name: parts[0], Namespace: parts[1]}, nil
	}
	return ServiceRef{}, fmt.Errorf("%q is not a name of a mesh service: a service S in namespace N is dialled as %s, or S alone in the current namespace (mesh domain %q; --mesh-domain)",
		host, strings.Join(resolve.Names("S", "N", meshDomain), ", "), meshDomain)
}
