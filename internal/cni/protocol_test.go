// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package cni

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// serve answers on a unix socket in a temporary directory with handler, until the test ends.
func serve(t *testing.T, handler http.HandlerFunc) string {
	t.Helper()
	socket := filepath.Join(t.TempDir(), "cni.sock")
	l, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return socket
}

var podRequest = Request{ContainerID: "c1", NetNS: "/var/run/netns/cni-1", IfName: "eth0", Namespace: "shop", Name: "payments-0", UID: "u1"}

func TestClientCall(t *testing.T) {
	socket := serve(t, func(w http.ResponseWriter, r *http.Request) {
		var req Request
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req != podRequest || r.URL.Path != PathAdd || r.Method != http.MethodPost {
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(Response{Error: "unexpected request"})
			return
		}
		_ = json.NewEncoder(w).Encode(Response{Managed: true, Reason: "labelled"})
	})
	got, err := NewClient(socket).Call(context.Background(), PathAdd, podRequest)
	if err != nil || !got.Managed || got.Reason != "labelled" {
		t.Errorf("Call = %+v, %v", got, err)
	}
}

// TestClientTellsUnreachableFromRefused: the plugin decides alone only when no answer came; an
// answer that is not a 200 is the agent's decision that the call fails.
func TestClientTellsUnreachableFromRefused(t *testing.T) {
	refusing := serve(t, func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		_ = json.NewEncoder(w).Encode(Response{Error: "programming the capture failed"})
	})
	_, err := NewClient(refusing).Call(context.Background(), PathAdd, podRequest)
	var agentErr *AgentError
	if !errors.As(err, &agentErr) || agentErr.Status != 500 || errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "programming the capture failed") {
		t.Errorf("a 500: err %v, want an AgentError with the agent's message", err)
	}

	garbled := serve(t, func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("<html>")) })
	if _, err := NewClient(garbled).Call(context.Background(), PathAdd, podRequest); !errors.As(err, &agentErr) || !strings.Contains(err.Error(), "not a JSON Response") {
		t.Errorf("a garbled answer: err %v, want an AgentError saying so", err)
	}

	nobody := filepath.Join(t.TempDir(), "cni.sock")
	if _, err := NewClient(nobody).Call(context.Background(), PathAdd, podRequest); !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), nobody) {
		t.Errorf("no socket: err %v, want ErrUnreachable naming the socket", err)
	}

	release := make(chan struct{})
	slow := serve(t, func(http.ResponseWriter, *http.Request) { <-release })
	defer close(release)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := NewClient(slow).Call(ctx, PathAdd, podRequest); !errors.Is(err, ErrUnreachable) {
		t.Errorf("no answer in time: err %v, want ErrUnreachable", err)
	}
}

func TestRequestValidate(t *testing.T) {
	if err := podRequest.Validate(PathAdd); err != nil {
		t.Errorf("a whole request: %v", err)
	}
	noNetNS := podRequest
	noNetNS.NetNS = ""
	if err := noNetNS.Validate(PathDel); err != nil {
		t.Errorf("a DEL without netns (its namespace gone): %v", err)
	}
	err := noNetNS.Validate(PathAdd)
	if err == nil || !strings.Contains(err.Error(), "netns (CNI_NETNS)") {
		t.Errorf("an ADD without netns: %v, want it named", err)
	}
	if err := (Request{}).Validate(PathDel); err == nil || !strings.Contains(err.Error(), "namespace (K8S_POD_NAMESPACE), name (K8S_POD_NAME), containerID (CNI_CONTAINERID)") {
		t.Errorf("an empty request: %v, want every missing field named", err)
	}
}

func TestParseConf(t *testing.T) {
	conf, s, err := ParseConf([]byte(`{"cniVersion":"1.0.0","name":"n","type":"aether-cni","prevResult":{"cniVersion":"1.0.0"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if s.AgentSocket != DefaultSocket || s.Timeout != DefaultTimeout || s.Kubeconfig != "" || !s.Ignored.Ignores("kube-system") || s.Ignored.Ignores("shop") {
		t.Errorf("defaults: %+v", s)
	}
	if string(conf.PrevResult) != `{"cniVersion":"1.0.0"}` {
		t.Errorf("prevResult %s, want the bytes as given", conf.PrevResult)
	}
	_, s, err = ParseConf([]byte(`{"cniVersion":"1.0.0","name":"n","type":"aether-cni","ignoredNamespaces":[],"timeout":"250ms"}`))
	if err != nil || len(s.Ignored) != 0 || s.Timeout != 250*time.Millisecond {
		t.Errorf("an empty ignored list and a timeout: %+v, %v", s, err)
	}
	for conf, want := range map[string]string{
		`{"name":"n","timeout":"soon"}`:                  `timeout "soon" is not a positive Go duration`,
		`{"name":"n","timeout":"-1s"}`:                   `timeout "-1s" is not a positive Go duration`,
		`{"name":"n","agentSocket":"cni.sock"}`:          `agentSocket "cni.sock" is not an absolute path`,
		`{"name":"n","kubeconfig":"kube/config"}`:        `kubeconfig "kube/config" is not an absolute path`,
		`{"name":"n","ignoredNamespaces":"kube-system"}`: "does not parse",
	} {
		if _, _, err := ParseConf([]byte(conf)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err %v, want %q", conf, err, want)
		}
	}
}
