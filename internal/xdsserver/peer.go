// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdsserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"

	"github.com/go-logr/logr"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"

	"github.com/aether-mesh/aether-operator/internal/proxyless"
)

// Who calls on the agent's sockets is learned from the connection: when the agent accepts one,
// the kernel says which process connected (SO_PEERCRED), the process's cgroup which pod it runs in
// (/proc/<pid>/cgroup, proxyless.PodUIDFromCgroup), and the agent's view of its node's pods which
// pod that is (Server.ResolvePodsWith). On the proxyless socket a stream may announce that pod's
// node ID only; the node's socket serves the node's Envoy's pods only (nodeenvoy.go).
//
// The pid names the connecting process only while it lives: one that exits may have its pid
// given to another process. Where the kernel has SO_PEERPIDFD (Linux 6.5), the agent holds the
// process itself while it reads the cgroup and checks it still runs afterwards, so the file read
// was the caller's; on an older kernel it reads the pid's file, and a caller that exits between
// its connect and the read (and whose pid another pod's process takes in that window) is the
// residual risk.

// Caller is who is at the other end of a connection to one of the agent's sockets, as the kernel
// says.
type Caller struct {
	// PID is the process that connected, in the agent's PID namespace.
	PID int32
	// PodUID is the UID of the pod it runs in; empty with Err.
	PodUID string
	// Err says why no pod is known: a node process, a process gone, a socket without credentials.
	Err error
}

// AuthType names how a Caller was learned (credentials.AuthInfo).
func (Caller) AuthType() string { return "peercred" }

// String names the caller for a log line or a refusal.
func (c Caller) String() string {
	if c.Err != nil {
		return fmt.Sprintf("process %d (no pod: %v)", c.PID, c.Err)
	}
	return fmt.Sprintf("process %d of pod UID %s", c.PID, c.PodUID)
}

// PodOfProcess is the UID of the pod process pid runs in, or why there is none.
type PodOfProcess func(pid int32) (string, error)

// ProcPods reads a process's pod from procRoot/<pid>/cgroup: "/proc" is the node's when the agent
// runs in the host's PID namespace (hostPID), as SO_PEERCRED names a process of another PID
// namespace 0.
func ProcPods(procRoot string) PodOfProcess {
	return func(pid int32) (string, error) {
		if pid <= 0 {
			return "", fmt.Errorf("the kernel names no process (pid %d): is the agent in the host's PID namespace (hostPID)?", pid)
		}
		raw, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(int(pid)), "cgroup"))
		if err != nil {
			return "", fmt.Errorf("reading its cgroup: %w", err)
		}
		return proxyless.PodUIDFromCgroup(string(raw))
	}
}

// Pod is what the agent knows of a pod of its node that a caller runs in: its name, and its labels
// (which tell the node's Envoy, NodeEnvoy).
type Pod struct {
	Namespace, Name string
	Labels          map[string]string
}

// String names the pod as its node ID does, <namespace>/<name>.
func (p Pod) String() string { return proxyless.NodeID(p.Namespace, p.Name) }

// NodePods reads the pod of this node with UID podUID, as the agent knows it: ok is false, with no
// error, when it knows no such pod.
type NodePods func(ctx context.Context, podUID string) (pod Pod, ok bool, err error)

// The bounds of what one pod can make the agent hold on the proxyless socket.
const (
	// maxProxylessMessage bounds a request: a proxyless client's names a few resources per target
	// it dials (each name well under 300 bytes: a mesh FQDN and a port), its node (an ID of at most
	// proxyless.MaxNodeIDLength, two metadata keys, its user agent) and, on a NACK, grpc-go's
	// reasons, one per rejected resource. 64 KiB holds a client of some hundreds of targets; a
	// larger request fails its stream with ResourceExhausted before it is read (grpc-go checks the
	// length prefix first), where the default 4 MiB would be read whole.
	maxProxylessMessage = 64 << 10
	// maxProxylessHeaders bounds a stream's HTTP/2 headers (the default allows 16 MiB): grpc-go
	// sends its method, content type, user agent and a timeout, well under 1 KiB.
	maxProxylessHeaders = 16 << 10
	// maxPerPod bounds one pod's connections, and its streams (each connection of grpc-go's xDS
	// client holds one ADS stream): one per process that runs a client, and a pod runs a few.
	// Callers of no pod share one such budget: their streams are refused anyway.
	maxPerPod = 16
)

// peerCredentials are the transport credentials of the agent's sockets: no encryption (a unix
// socket on the node, whose traffic never leaves it), but every connection learns its caller from
// the kernel on accept (AuthInfo Caller), and, with a bound, one pod holds at most that many
// connections (the proxyless socket's maxPerPod).
type peerCredentials struct {
	podOf PodOfProcess
	log   logr.Logger
	// bound is the most connections one pod may hold; 0: no bound (the node's socket, where the
	// node's Envoy holds one connection per worker thread for its access log besides its ADS
	// stream, and every other caller is refused its streams: nodeenvoy.go).
	bound int

	mu sync.Mutex
	// conns counts the open connections per pod UID; "" counts those of no pod.
	conns map[string]int
}

var _ credentials.TransportCredentials = (*peerCredentials)(nil)

func newPeerCredentials(podOf PodOfProcess, log logr.Logger, bound int) *peerCredentials {
	return &peerCredentials{podOf: podOf, log: log, bound: bound, conns: map[string]int{}}
}

// ServerHandshake learns conn's caller, and refuses it when its pod holds p.bound connections
// already (the connection is closed, and the client's backoff slows it down).
func (p *peerCredentials) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	caller := p.callerOf(conn)
	if p.bound == 0 {
		return conn, caller, nil
	}
	key := caller.PodUID
	p.mu.Lock()
	if p.conns[key] >= p.bound {
		p.mu.Unlock()
		proxylessRefused.WithLabelValues(refusedConnections).Inc()
		p.log.V(1).Info("Refusing a proxyless connection: its pod holds as many as it may", "caller", caller.String(), "max", p.bound)
		return nil, nil, fmt.Errorf("%s holds %d connections to the proxyless socket already, the most one pod may", caller, p.bound)
	}
	p.conns[key]++
	p.mu.Unlock()
	release := sync.OnceFunc(func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.conns[key]--; p.conns[key] <= 0 {
			delete(p.conns, key)
		}
	})
	return &countedConn{Conn: conn, release: release}, caller, nil
}

// callerOf asks the kernel who connected conn, then which pod that process runs in.
func (p *peerCredentials) callerOf(conn net.Conn) Caller {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return Caller{Err: fmt.Errorf("a %T carries no peer credentials: the proxyless socket must be a unix socket", conn)}
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return Caller{Err: err}
	}
	var cred *unix.Ucred
	var credErr, pidfdErr error
	pidfd := -1
	if err := raw.Control(func(fd uintptr) {
		if cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED); credErr != nil {
			return
		}
		pidfd, pidfdErr = peerPIDFD(int(fd))
	}); err != nil {
		return Caller{Err: err}
	}
	if credErr != nil {
		return Caller{Err: fmt.Errorf("reading the peer's credentials (SO_PEERCRED): %w", credErr)}
	}
	caller := Caller{PID: cred.Pid}
	switch {
	case pidfdErr == nil:
		defer func() { _ = unix.Close(pidfd) }()
	case errors.Is(pidfdErr, unix.ENOPROTOOPT):
		// A kernel before 6.5, which has no such option: the pid alone (the residual risk above).
	case errors.Is(pidfdErr, unix.EINVAL):
		// The kernel has the option and cannot hold the process: it exited (and was reaped)
		// after it connected, and its pid may be another process's already. Before 6.16 the
		// kernel says so with EINVAL; since, it hands out a pidfd of the exited process, which
		// exited below tells.
		caller.Err = fmt.Errorf("holding the calling process (SO_PEERPIDFD): %w: it exited after it connected, and its pid may name another process now", pidfdErr)
		return caller
	default:
		caller.Err = fmt.Errorf("holding the calling process (SO_PEERPIDFD): %w (it exited?)", pidfdErr)
		return caller
	}
	caller.PodUID, caller.Err = p.podOf(caller.PID)
	if caller.Err == nil && pidfd >= 0 && exited(pidfd) {
		caller.PodUID, caller.Err = "", errors.New("the calling process exited while its pod was read: its pid may name another process now")
	}
	return caller
}

// peerPIDFD is SO_PEERPIDFD of the connected unix socket fd: a pidfd of the process that
// connected. A variable so that a test can give the answers of kernels other than its own.
var peerPIDFD = func(fd int) (int, error) { return unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_PEERPIDFD) }

// exited reports whether the process of pidfd has exited (a pidfd turns readable then).
func exited(pidfd int) bool {
	fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 0)
	return err != nil || n > 0
}

// ClientHandshake is not used: the agent serves, it does not dial.
func (p *peerCredentials) ClientHandshake(context.Context, string, net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errors.New("peer credentials are the proxyless server's only")
}

// Info says the connection is not encrypted: it is a unix socket on the node.
func (p *peerCredentials) Info() credentials.ProtocolInfo {
	return credentials.ProtocolInfo{SecurityProtocol: "peercred"}
}

// Clone is p: its connection counts are the server's.
func (p *peerCredentials) Clone() credentials.TransportCredentials { return p }

// OverrideServerName is a client's concern (deprecated in grpc-go).
func (p *peerCredentials) OverrideServerName(string) error { return nil }

// proxylessConns is how many connections to the proxyless socket pod podUID holds.
func (s *Server) proxylessConns(podUID string) int {
	s.peers.mu.Lock()
	defer s.peers.mu.Unlock()
	return s.peers.conns[podUID]
}

// countedConn gives its pod's connection back when it closes.
type countedConn struct {
	net.Conn
	release func()
}

func (c *countedConn) Close() error {
	c.release()
	return c.Conn.Close()
}

// callerOfStream is the caller of the connection ctx's stream came on.
func callerOfStream(ctx context.Context) Caller {
	if p, ok := peer.FromContext(ctx); ok {
		if c, ok := p.AuthInfo.(Caller); ok {
			return c
		}
	}
	return Caller{Err: errors.New("the connection carries no caller (not the peer credentials of the agent's sockets)")}
}
