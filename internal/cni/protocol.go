// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package cni

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
)

// The protocol between the plugin and the node agent: HTTP/1.1 over the agent's unix socket
// (--cni-socket, DefaultSocket). One request per CNI call: POST to PathAdd, PathDel or PathCheck
// with a JSON Request body. The agent answers:
//
//   - 200 and a JSON Response when it decided: the pod is in the mesh and was handed over
//     (Managed, its netns recorded and, with capture, programmed before the answer), or it is not
//     and Reason says why (its label, an ignored namespace, a pod already gone);
//   - 400 and a Response whose Error names the bad field, for a request it cannot read;
//   - 500 and a Response whose Error says what failed (the pod could not be read, its netns could
//     not be programmed), for ADD and CHECK; DEL never fails for a pod the agent does not know.
//
// The plugin fails ADD and CHECK on anything but a 200. A connection it cannot make, or an answer
// that does not come within its timeout, is ErrUnreachable: the plugin then decides alone whether
// the pod might be meshed (see cmd/cni).
//
// With curl, for a person debugging a node:
//
//	curl --unix-socket /var/run/aether/cni/cni.sock -d '{"namespace":"ns","name":"pod","uid":"…","containerID":"…","netns":"/var/run/netns/cni-…"}' http://agent/v1/check
const (
	PathAdd   = "/v1/add"
	PathDel   = "/v1/del"
	PathCheck = "/v1/check"
)

// DefaultRunDir is the agent's CNI directory on the host (the DaemonSet's hostPath), mounted at
// the same path in the agent's container, so the plugin, which runs on the host, finds the socket
// and its kubeconfig at the paths the agent gives. Not /var/run/aether itself: that is the
// agent's volume shared with the node's Envoy (the xDS socket), which must not see the agent's
// credentials nor hand pods over.
const DefaultRunDir = "/var/run/aether/cni"

// DefaultSocket is where the agent listens for the plugin unless --cni-socket says otherwise.
const DefaultSocket = DefaultRunDir + "/cni.sock"

// Request is one CNI call's pod, as the runtime named it: CNI_CONTAINERID, CNI_NETNS, CNI_IFNAME
// and CNI_ARGS' K8S_POD_NAMESPACE, K8S_POD_NAME and K8S_POD_UID.
type Request struct {
	// ContainerID is the pod sandbox's ID (CNI_CONTAINERID). A DEL forgets a pod only if it is
	// the sandbox the agent recorded: a sandbox replaced by a new one of the same pod may be
	// deleted after the new one was added.
	ContainerID string `json:"containerID"`
	// NetNS is the path of the sandbox's network namespace on the host (CNI_NETNS); empty on a
	// DEL whose namespace is already gone.
	NetNS string `json:"netns,omitempty"`
	// IfName is the interface the runtime asked for (CNI_IFNAME), for logs.
	IfName string `json:"ifName,omitempty"`
	// Namespace, Name and UID name the pod (K8S_POD_NAMESPACE, K8S_POD_NAME, K8S_POD_UID). UID
	// may be empty if the runtime does not pass it; the agent then reads it from the pod.
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid,omitempty"`
}

// Validate names the first missing field a command needs.
func (r Request) Validate(path string) error {
	var missing []string
	if r.Namespace == "" {
		missing = append(missing, "namespace (K8S_POD_NAMESPACE)")
	}
	if r.Name == "" {
		missing = append(missing, "name (K8S_POD_NAME)")
	}
	if r.ContainerID == "" {
		missing = append(missing, "containerID (CNI_CONTAINERID)")
	}
	if path != PathDel && r.NetNS == "" {
		missing = append(missing, "netns (CNI_NETNS)")
	}
	if len(missing) > 0 {
		return fmt.Errorf("the request to %s lacks %s: the plugin sends what the runtime passed in CNI_ARGS and the CNI_* variables", path, strings.Join(missing, ", "))
	}
	return nil
}

// Pod is "namespace/name", for messages.
func (r Request) Pod() string { return r.Namespace + "/" + r.Name }

// Response is the agent's answer.
type Response struct {
	// Managed is true when the pod is in the mesh and was handed over (ADD), is recorded with
	// this sandbox (CHECK), or was forgotten (DEL).
	Managed bool `json:"managed"`
	// Reason says why the agent decided as it did, for logs and errors.
	Reason string `json:"reason,omitempty"`
	// Error is set, with a status other than 200, when the agent could not decide or could not
	// do what the pod needs.
	Error string `json:"error,omitempty"`
}

// ErrUnreachable is the error of a call that got no answer from the agent: no socket, nobody
// listening, or no answer within the timeout.
var ErrUnreachable = errors.New("the node agent is unreachable")

// AgentError is the agent's answer when it is not a 200: it decided the call fails.
type AgentError struct {
	Status int
	Err    string
}

func (e *AgentError) Error() string {
	return fmt.Sprintf("the node agent answered %d: %s", e.Status, e.Err)
}

// Client calls the agent on its unix socket.
type Client struct {
	Socket string
	http   *http.Client
}

// NewClient is a client of the agent listening on socket.
func NewClient(socket string) *Client {
	dialer := &net.Dialer{}
	return &Client{Socket: socket, http: &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dialer.DialContext(ctx, "unix", socket)
		},
		DisableKeepAlives: true, // one call per plugin process
	}}}
}

// Call sends req to path and returns the agent's 200 answer. It fails with an error wrapping
// ErrUnreachable when no answer came before ctx ended, or with an *AgentError when the agent
// answered anything but 200.
func (c *Client) Call(ctx context.Context, path string, req Request) (Response, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return Response{}, err
	}
	httpReq, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://aether-agent"+path, bytes.NewReader(body))
	if err != nil {
		return Response{}, err
	}
	httpReq.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(httpReq)
	if err != nil {
		return Response{}, fmt.Errorf("%w at %s: %w", ErrUnreachable, c.Socket, err)
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return Response{}, fmt.Errorf("%w at %s: reading its answer: %w", ErrUnreachable, c.Socket, err)
	}
	var answer Response
	if err := json.Unmarshal(data, &answer); err != nil {
		return Response{}, &AgentError{Status: resp.StatusCode, Err: fmt.Sprintf("an answer that is not a JSON Response (%v): %.200q", err, data)}
	}
	if resp.StatusCode != http.StatusOK {
		return Response{}, &AgentError{Status: resp.StatusCode, Err: answer.Error}
	}
	return answer, nil
}
