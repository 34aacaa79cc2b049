// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdswalk

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/capture"
	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/resolve"
	"github.com/aether-mesh/aether-operator/internal/xds"
	"github.com/aether-mesh/aether-operator/internal/xds/xdssim"
)

// Case is one connection of the walk: a client's dial of one row of a service's dial surface,
// by one of the service's names, before a shape is chosen (ShapeConn makes each shape of it).
type Case struct {
	Client  model.LocalPod
	Service model.Service
	// Name is the name the row spells; FQDN the service's mesh name.
	Name, FQDN string
	// Row is the row as status says it, for Name; its Result is the one written for FQDN (the 421
	// bodies name the mesh name's spellings whichever name the client used: one answer per
	// authority keeps the route configuration small).
	Row resolve.Dial
	// Conn is the connection the row's own client opens (to the service's VIP; every name
	// resolves to it), its Listener not yet known: the client's capture decides.
	Conn xdssim.Conn
}

// Cases are client's connections in m: every service with a VIP and an identity that no Gateway
// API route attaches to (a route sends their traffic elsewhere on purpose: the route tests'
// business), every name of it that holds from client's namespace (resolve.NamesFrom: the bare
// name from its own namespace only), every row of its dial surface (resolve.DialSurface, what
// MeshService.status.dialSurface says) that client's capture mode redirects to the proxy (every
// row in surface and all mode; in scoped mode only what is dialled on the mesh ports 18081 and
// 18082, DESIGN section 8), and none for <name>:18081 itself (HostDecides: its Host rows are
// walked).
func Cases(m model.Mesh, client model.LocalPod) []Case {
	routed := map[string]bool{}
	for _, r := range m.Routes {
		for _, p := range r.Parents {
			routed[p.Namespace+"/"+p.Name] = true
		}
	}
	var out []Case
	for _, svc := range m.Services {
		if svc.VIP == "" || svc.Identity == "" || routed[svc.Namespace+"/"+svc.Name] {
			continue
		}
		set := svc.PortSet()
		fqdn := xds.FQDN(svc.Name, svc.Namespace, m.Domain)
		for _, name := range resolve.NamesFrom(svc.Name, svc.Namespace, client.Namespace, m.Domain) {
			for _, template := range resolve.DialSurface(set, m.Issuer) {
				row := template.For(name)
				row.Result = template.For(fqdn).Result
				for _, conn := range connections(row, name, svc.VIP, set, client.Capture) {
					out = append(out, Case{Client: client, Service: svc, Name: name, FQDN: fqdn, Row: row, Conn: conn})
				}
			}
		}
	}
	return out
}

// portSet is what a row's connection needs of a service's ports.
type portSet interface {
	Lookup(int32) (meshv1alpha1.Protocol, bool)
}

// connections are the connections a client makes for one surface row, to the service's VIP; none
// for the rows its capture mode does not redirect to the proxy, and none for <name>:18081 itself.
func connections(row resolve.Dial, name, vip string, set portSet, mode model.CaptureMode) []xdssim.Conn {
	const hostRow = resolve.HostRowPrefix
	scoped := mode == model.CaptureScoped
	http := func(port int32, host string) xdssim.Conn {
		return xdssim.Conn{DstIP: vip, DstPort: uint32(port), HTTP: &xdssim.Request{Host: host}}
	}
	bytes := func(port int32) xdssim.Conn { return xdssim.Conn{DstIP: vip, DstPort: uint32(port)} }
	undeclared := UndeclaredPort(set)
	addr := row.Address
	switch {
	case row.Outcome == resolve.HostDecides:
		return nil
	case strings.HasSuffix(addr, resolve.UDPSuffix):
		return nil // datagrams: the node proxy does not carry UDP yet, and the walk dials TCP
	case strings.HasPrefix(addr, hostRow):
		host := strings.TrimPrefix(addr, hostRow)
		if strings.HasSuffix(host, ":"+resolve.AnyOtherPort) {
			host = strings.TrimSuffix(host, resolve.AnyOtherPort) + strconv.Itoa(int(undeclared))
		}
		return []xdssim.Conn{http(meshv1alpha1.MeshHTTPPort, host)}
	case addr == "http://"+name+"/":
		if scoped {
			return nil
		}
		return []xdssim.Conn{http(resolve.HTTPPort, name)}
	case addr == "https://"+name+"/":
		if scoped {
			return nil
		}
		return []xdssim.Conn{{DstIP: vip, DstPort: uint32(resolve.HTTPSPort), TLS: true, SNI: name, ALPN: []string{"h2", "http/1.1"}}}
	case addr == name+":"+resolve.AnyOtherPort:
		if scoped {
			return nil
		}
		return []xdssim.Conn{bytes(undeclared)}
	}
	port, err := strconv.Atoi(strings.TrimPrefix(addr, name+":"))
	if err != nil {
		panic(fmt.Sprintf("surface row %q is of no shape this walk knows", addr))
	}
	if scoped && int32(port) != meshv1alpha1.MeshTCPPort {
		return nil
	}
	if p, ok := set.Lookup(int32(port)); ok && p.IsHTTP() {
		// <name>:<p>, p HTTP: an HTTP client sends Host name:p.
		return []xdssim.Conn{http(int32(port), name+":"+strconv.Itoa(port))}
	}
	return []xdssim.Conn{bytes(int32(port))}
}

// UndeclaredPort is a port the service does not declare and the mesh does not own: what a row
// "any other port" is dialled on.
func UndeclaredPort(set portSet) int32 {
	for _, p := range []int32{7, 1234, 65000, 65001} {
		if _, ok := set.Lookup(p); !ok {
			return p
		}
	}
	panic("every candidate port is declared")
}

// Describe spells a connection on one line, for failures.
func Describe(c xdssim.Conn) string {
	s := net.JoinHostPort(c.DstIP, strconv.Itoa(int(c.DstPort)))
	if c.TLS {
		s += fmt.Sprintf(" TLS sni=%q alpn=%v", c.SNI, c.ALPN)
	}
	if c.HTTP != nil {
		s += " HTTP Host=" + c.HTTP.Host
		switch {
		case c.HTTP.HTTP2:
			s += " (h2c)"
		case c.HTTP.HTTP10:
			s += " (HTTP/1.0)"
		}
		if c.HTTP.Upgrade != "" {
			s += " Upgrade=" + c.HTTP.Upgrade
		}
	}
	if c.FirstBytesAfter > 0 {
		s += fmt.Sprintf(", first bytes after %s", c.FirstBytesAfter)
	}
	if c.ServerFirst {
		s += ", server-first"
	}
	return s
}

// CapturedBy is the listener a connection conn of client's reaches: the one the client's capture
// rules redirect it to, bound in the client's network namespace at the loopback address of the
// connection's family, which must be client's capture listener; captured says the rules redirect
// it. A connection the rules leave alone (a row Cases walks that the mode does not redirect, such
// as a port the service does not declare) goes to the VIP itself, which refuses it; the
// simulator's walk sends it through the capture listener as ever, since its outcome (refused) is
// the same whether the VIP or the passthrough refuses it.
func CapturedBy(sim *xdssim.Sim, client model.LocalPod, rules capture.Ruleset, conn xdssim.Conn) (listener string, captured bool, err error) {
	own := xds.CaptureListener(xds.PodKey(client.Namespace, client.Name))
	dst, err := netip.ParseAddr(conn.DstIP)
	if err != nil {
		return "", false, err
	}
	listener, err = sim.Capture(client.NetNS, rules, netip.AddrPortFrom(dst, uint16(conn.DstPort)))
	switch {
	case err != nil:
		return "", false, err
	case listener == "":
		return own, false, nil
	case listener != own:
		return "", false, fmt.Errorf("the capture rules redirect it to listener %q, not the pod's capture listener %q", listener, own)
	}
	return listener, true, nil
}
