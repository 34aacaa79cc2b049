// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package plugin

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
	"k8s.io/streaming/pkg/httpstream"

	"github.com/aether-mesh/aether-operator/internal/apiauth"
)

// AgentGet reads path from port on the loopback of agent's pod: status and body of the answer.
type AgentGet func(ctx context.Context, agent *corev1.Pod, port int, path string) (status int, body []byte, err error)

// PortForwardGet is AgentGet through a port-forward of the API server (the pods/portforward
// subresource, as kubectl port-forward): the API server authenticates the caller and authorizes
// create on pods/portforward for the agent's pod, then the node's container runtime connects to
// the port on the pod's loopback, the agent's metrics endpoint, where the request is sent over
// HTTPS with config's credentials (AgentFetch). The forwarded port listens on this machine's
// 127.0.0.1 for the one request only.
func PortForwardGet(config *rest.Config) AgentGet {
	return func(ctx context.Context, agent *corev1.Pod, port int, path string) (int, []byte, error) {
		cs, err := kubernetes.NewForConfig(config)
		if err != nil {
			return 0, nil, err
		}
		url := cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(agent.Namespace).Name(agent.Name).SubResource("portforward").URL()
		transport, upgrader, err := spdy.RoundTripperFor(config)
		if err != nil {
			return 0, nil, err
		}
		dialer := spdy.NewDialerForStreaming(upgrader, &http.Client{Transport: transport}, http.MethodPost, url)
		// WebSockets first, SPDY for an API server that does not speak them (as kubectl does).
		if tunnel, err := portforward.NewSPDYOverWebsocketDialerForStreaming(url, config); err == nil {
			dialer = portforward.NewFallbackDialerForStreaming(tunnel, dialer, func(err error) bool {
				return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
			})
		}
		stop, ready := make(chan struct{}), make(chan struct{})
		defer close(stop)
		errOut := &lockedBuffer{}
		fw, err := portforward.NewOnAddressesForStreaming(dialer, []string{"127.0.0.1"}, []string{"0:" + strconv.Itoa(port)}, stop, ready, io.Discard, errOut)
		if err != nil {
			return 0, nil, err
		}
		failed := make(chan error, 1)
		go func() { failed <- fw.ForwardPorts() }()
		select {
		case <-ready:
		case err := <-failed:
			return 0, nil, fmt.Errorf("port-forward to pod %s/%s: %w", agent.Namespace, agent.Name, err)
		case <-ctx.Done():
			return 0, nil, ctx.Err()
		}
		ports, err := fw.GetPorts()
		if err != nil || len(ports) != 1 {
			return 0, nil, fmt.Errorf("port-forward to pod %s/%s: no local port (%v)", agent.Namespace, agent.Name, err)
		}
		status, body, err := AgentFetch(ctx, config, "https://127.0.0.1:"+strconv.Itoa(int(ports[0].Local))+path)
		if err != nil {
			return 0, nil, fmt.Errorf("port-forward to pod %s/%s port %d: %w%s", agent.Namespace, agent.Name, port, err, errOut.said())
		}
		return status, body, nil
	}
}

// AgentFetch GETs url, an agent's metrics endpoint, over HTTPS with config's credentials (the
// user's client certificate or bearer token, apiauth.Transport): the agent asks the API server
// who sent them and whether that user may get the path. At most maxAnswer bytes are read.
func AgentFetch(ctx context.Context, config *rest.Config, url string) (int, []byte, error) {
	rt, err := apiauth.Transport(config)
	if err != nil {
		return 0, nil, fmt.Errorf("your kubeconfig's credentials: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, nil, err
	}
	resp, err := (&http.Client{Transport: rt}).Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	return resp.StatusCode, body, err
}

// maxAnswer caps the agent's answer held in memory: a pod's part of a large node's
// configuration is some megabytes.
const maxAnswer = 256 << 20

// lockedBuffer is the port-forwarder's error output: what the runtime said of a failed
// connection (nothing listening on the port).
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// said is what was written, as a suffix of an error message.
func (b *lockedBuffer) said() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if s := strings.TrimSpace(b.buf.String()); s != "" {
		return " (" + s + ")"
	}
	return ""
}
