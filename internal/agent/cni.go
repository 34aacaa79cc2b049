// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aether-mesh/aether-operator/internal/cni"
	"github.com/aether-mesh/aether-operator/internal/registration"
)

// CaptureProgrammer programs a pod's capture in its network namespace when the CNI plugin hands
// the pod over, before the plugin's ADD returns: the runtime starts the pod's containers only
// after ADD, so a meshed pod never runs a moment uncaptured. internal/capture's applier implements
// it; without one (CNIOptions.Capture nil) the hand-over only records the namespace.
type CaptureProgrammer interface {
	// Program makes pod's capture rules hold in pod.NetNS. An error fails the plugin's ADD (the
	// runtime tears the sandbox down and the kubelet retries).
	Program(ctx context.Context, pod CapturePod) error
	// Forget drops what Program kept of pod uid: its sandbox is gone (CNI DEL).
	Forget(uid types.UID)
}

// CapturePod is a pod the CNI plugin handed over.
type CapturePod struct {
	// Pod is the pod as the agent read it: from its node's cache, or from the API server when
	// the cache had not seen it yet.
	Pod *corev1.Pod
	// ContainerID is the pod sandbox's ID (CNI_CONTAINERID).
	ContainerID string
	// NetNS is the path of the sandbox's network namespace (CNI_NETNS), also in the NetNS registry.
	NetNS string
}

// CNIOptions turn on the hand-over from the CNI plugin (cmd/cni): the agent answers the plugin on
// Listener (protocol: internal/cni), records each meshed pod's network namespace in NetNS and,
// with Capture, programs it before answering.
type CNIOptions struct {
	// Listener is the unix socket the plugin calls (ListenCNI).
	Listener net.Listener
	// NetNS is the registry the hand-over records into; the xDS publisher reads the same one
	// (Setup gives it to XDSOptions when that has none). A new in-memory one if nil.
	NetNS *NetNS
	// Capture programs a handed-over pod's netns; nil: only record it.
	Capture CaptureProgrammer
	// CacheWait is how long the agent waits for a pod its cache has not seen yet before it reads
	// the pod from the API server (DefaultCNICacheWait if zero).
	CacheWait time.Duration
	// DrainTail is how long a deleted sandbox's namespace stays pinned, and its pod's listeners in
	// the node Envoy's configuration, after DEL (NetNS.DrainSandbox): DefaultNetNSDrainTail if
	// zero; negative: none (the listeners go with the next rebuild).
	DrainTail time.Duration
}

// DefaultCNICacheWait is CNIOptions.CacheWait's default. The kubelet starts a pod's sandbox right
// after it sees the pod, so the agent's cache, fed by the same API server, is usually as far;
// after this it reads the pod directly.
const DefaultCNICacheWait = time.Second

// ListenCNI opens the unix socket at path for the plugin: its directory is created (0750), a
// stale socket of an earlier agent replaced, and the socket is 0600: only the agent's user (root
// on a node, as the container runtime that runs the plugin) may hand pods over.
func ListenCNI(path string) (net.Listener, error) {
	if !filepath.IsAbs(path) {
		return nil, fmt.Errorf("--cni-socket %q is not an absolute path; e.g. %s", path, cni.DefaultSocket)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("creating the CNI socket's directory: %w", err)
	}
	if info, err := os.Lstat(path); err == nil {
		if info.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("%s exists and is not a socket (mode %s): not removing it; remove it or choose another --cni-socket", path, info.Mode())
		}
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			_ = c.Close()
			return nil, fmt.Errorf("another process serves %s (is another agent running?); stop it or choose another --cni-socket", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("removing the stale CNI socket %s: %w", path, err)
		}
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listening for the CNI plugin on %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		_ = l.Close()
		return nil, fmt.Errorf("setting the CNI socket's mode: %w", err)
	}
	return l, nil
}

// cniServer answers the CNI plugin.
type cniServer struct {
	cache     client.Reader // the manager's: this node's pods
	reader    client.Reader // the API server, for a pod the cache has not seen yet
	node      string
	ignored   registration.IgnoredNamespaces
	netns     *NetNS
	capture   CaptureProgrammer
	cacheWait time.Duration
	drainTail time.Duration // not positive: none
	listener  net.Listener
	log       logr.Logger
}

// newCNIServer is the server of o.CNI (whose NetNS Setup defaulted), CacheWait and DrainTail
// defaulted.
func newCNIServer(cache, reader client.Reader, log logr.Logger, o Options) *cniServer {
	c := *o.CNI
	return &cniServer{cache: cache, reader: reader, node: o.NodeName, ignored: o.IgnoredNamespaces, netns: c.NetNS,
		capture: c.Capture, cacheWait: cmp.Or(c.CacheWait, DefaultCNICacheWait), drainTail: cmp.Or(c.DrainTail, DefaultNetNSDrainTail),
		listener: c.Listener, log: log.WithName("cni")}
}

// NeedLeaderElection is false: every node's agent answers its own node's plugin.
func (s *cniServer) NeedLeaderElection() bool { return false }

// Start serves the plugin until ctx ends.
func (s *cniServer) Start(ctx context.Context) error {
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	s.log.Info("Serving the CNI plugin", "socket", s.listener.Addr().String())
	if err := srv.Serve(s.listener); !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serving the CNI plugin: %w", err)
	}
	return nil
}

// answer is a handler's result: the HTTP status and the Response.
type answer struct {
	status int
	cni.Response
}

func decided(managed bool, reason string) answer {
	return answer{status: http.StatusOK, Response: cni.Response{Managed: managed, Reason: reason}}
}

func failed(status int, format string, args ...any) answer {
	return answer{status: status, Response: cni.Response{Error: fmt.Sprintf(format, args...)}}
}

// ServeHTTP reads one Request, answers it and counts the outcome.
func (s *cniServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	handlers := map[string]func(context.Context, cni.Request) answer{
		cni.PathAdd: s.add, cni.PathDel: s.del, cni.PathCheck: s.check,
	}
	handle, known := handlers[r.URL.Path]
	var a answer
	var req cni.Request
	switch {
	case !known:
		a = failed(http.StatusNotFound, "no such path %q: the plugin calls %s, %s or %s", r.URL.Path, cni.PathAdd, cni.PathDel, cni.PathCheck)
	case r.Method != http.MethodPost:
		a = failed(http.StatusMethodNotAllowed, "%s %s: the plugin POSTs", r.Method, r.URL.Path)
	default:
		body, err := io.ReadAll(io.LimitReader(r.Body, 64<<10))
		if err == nil {
			err = json.Unmarshal(body, &req)
		}
		if err == nil {
			err = req.Validate(r.URL.Path)
		}
		if err != nil {
			a = failed(http.StatusBadRequest, "%v", err)
		} else {
			a = handle(r.Context(), req)
		}
	}
	command := cmp.Or(cniCommands[r.URL.Path], "unknown")
	cniRequests.WithLabelValues(command, cniResult(a)).Inc()
	if a.status != http.StatusOK {
		s.log.Error(errors.New(a.Error), "CNI request failed", "command", command, "pod", req.Pod(), "uid", req.UID, "containerID", req.ContainerID)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(a.status)
	_ = json.NewEncoder(w).Encode(a.Response)
}

// add hands a pod over: if it is in the mesh, its namespace is recorded (and, with capture,
// programmed) before the answer.
func (s *cniServer) add(ctx context.Context, req cni.Request) answer {
	if !filepath.IsAbs(req.NetNS) {
		return failed(http.StatusBadRequest, "netns %q (CNI_NETNS) is not an absolute path", req.NetNS)
	}
	pod, why, err := s.meshedPod(ctx, req)
	if err != nil || pod == nil {
		return answerFor(err, why)
	}
	if err := s.netns.RecordSandbox(pod.UID, req.ContainerID, req.NetNS); err != nil {
		return failed(http.StatusInternalServerError, "recording the network namespace of pod %s: %v", req.Pod(), err)
	}
	if s.capture != nil {
		if err := s.capture.Program(ctx, CapturePod{Pod: pod, ContainerID: req.ContainerID, NetNS: req.NetNS}); err != nil {
			s.netns.ForgetSandbox(pod.UID, req.ContainerID)
			return failed(http.StatusInternalServerError, "programming the capture of pod %s in its network namespace %s: %v", req.Pod(), req.NetNS, err)
		}
		why += "; its network namespace is recorded and its capture programmed"
	} else {
		why += "; its network namespace is recorded"
	}
	s.log.Info("Recorded the pod's network namespace", "pod", req.Pod(), "uid", pod.UID, "netns", req.NetNS,
		"containerID", req.ContainerID, "captureProgrammed", s.capture != nil)
	return decided(true, why)
}

// del forgets the pod whose sandbox is deleted, its drain tail running on (NetNS.DrainSandbox):
// never a failure, whatever the agent knew of it.
func (s *cniServer) del(_ context.Context, req cni.Request) answer {
	uid, forgotten := s.netns.DrainSandbox(types.UID(req.UID), req.ContainerID, s.drainTail)
	if !forgotten {
		return decided(false, fmt.Sprintf("no network namespace of pod %s was recorded from sandbox %s: nothing to forget", req.Pod(), req.ContainerID))
	}
	// Capture forgets the pod at once, tail or not: its table stays in the namespace as it is
	// (removed nothing; a connection it redirected already runs on its conntrack entry), but is
	// no longer kept in sync. The pod's processes are gone at DEL: no new connection starts there
	// for a rule to redirect, and a service change meanwhile has nothing to reach.
	if s.capture != nil {
		s.capture.Forget(uid)
	}
	listeners := "its listeners go with the next rebuild (no drain tail)"
	if s.drainTail > 0 {
		listeners = fmt.Sprintf("its listeners stay for the drain tail, %s", s.drainTail)
	}
	s.log.Info("Forgot the pod's network namespace", "pod", req.Pod(), "uid", uid, "containerID", req.ContainerID, "listeners", listeners)
	return decided(true, fmt.Sprintf("forgot the network namespace of pod %s; %s", req.Pod(), listeners))
}

// check confirms that a meshed pod's namespace is recorded from this sandbox.
func (s *cniServer) check(ctx context.Context, req cni.Request) answer {
	pod, why, err := s.meshedPod(ctx, req)
	if err != nil || pod == nil {
		return answerFor(err, why)
	}
	path, sandbox, ok := s.netns.Sandbox(pod.UID)
	switch {
	case !ok:
		return failed(http.StatusInternalServerError, "pod %s is in the mesh (%s) but no network namespace of it is recorded: "+
			"it was never handed over, or was handed over before an agent without its registry; delete the pod to restart it captured", req.Pod(), why)
	case path != req.NetNS || (sandbox != "" && sandbox != req.ContainerID):
		return failed(http.StatusInternalServerError, "pod %s: the recorded network namespace is %s of sandbox %s, not %s of sandbox %s",
			req.Pod(), path, sandbox, req.NetNS, req.ContainerID)
	}
	return decided(true, why+"; its network namespace is recorded from this sandbox")
}

// answerFor is the answer of meshedPod's outcome when it returned no pod: a failure, or the
// reason the pod is not taken.
func answerFor(err error, why string) answer {
	if err != nil {
		return failed(http.StatusInternalServerError, "%v", err)
	}
	return decided(false, why)
}

// meshedPod is req's pod when the mesh takes it, with the reason; nil and the reason when it does
// not; or an error when that cannot be told.
func (s *cniServer) meshedPod(ctx context.Context, req cni.Request) (*corev1.Pod, string, error) {
	if s.ignored.Ignores(req.Namespace) {
		return nil, fmt.Sprintf("namespace %s is ignored by the mesh (--ignored-namespaces)", req.Namespace), nil
	}
	pod, err := s.readPod(ctx, req)
	if err != nil {
		return nil, "", err
	}
	if pod == nil {
		return nil, fmt.Sprintf("pod %s (uid %q) no longer exists: its sandbox is being torn down", req.Pod(), req.UID), nil
	}
	in, why := s.ignored.Verdict(pod)
	if !in {
		return nil, why, nil
	}
	if pod.Spec.NodeName != s.node {
		return nil, "", fmt.Errorf("pod %s is bound to node %q, but this agent serves node %s: the plugin called another node's agent (check the plugin's agentSocket)",
			req.Pod(), pod.Spec.NodeName, s.node)
	}
	return pod, why, nil
}

// readPod reads req's pod from the node's cache, waiting up to cacheWait for the cache to see
// it, then from the API server. Nil when it does not exist, or when the pod of that name is
// another than req's UID (the sandbox's pod is gone).
func (s *cniServer) readPod(ctx context.Context, req cni.Request) (*corev1.Pod, error) {
	key := client.ObjectKey{Namespace: req.Namespace, Name: req.Name}
	matches := func(p *corev1.Pod) bool { return req.UID == "" || p.UID == types.UID(req.UID) }
	waitCtx, cancel := context.WithTimeout(ctx, s.cacheWait)
	defer cancel()
	for {
		pod := &corev1.Pod{}
		err := s.cache.Get(waitCtx, key, pod)
		if err == nil && matches(pod) {
			return pod, nil
		}
		if err != nil && !apierrors.IsNotFound(err) {
			break // the cache cannot answer (not synced before waitCtx ended): ask the API server
		}
		select {
		case <-waitCtx.Done():
		case <-time.After(50 * time.Millisecond):
			continue
		}
		break
	}
	pod := &corev1.Pod{}
	if err := s.reader.Get(ctx, key, pod); apierrors.IsNotFound(err) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("reading pod %s from the API server (the agent's cache has not seen it): %w", req.Pod(), err)
	}
	if !matches(pod) {
		return nil, nil
	}
	return pod, nil
}
