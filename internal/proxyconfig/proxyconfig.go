// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package proxyconfig

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/aether-mesh/aether-operator/internal/xds"
)

// Flag is the agent's flag that turns the endpoint on (the default) or off.
const Flag = "proxy-config"

// The endpoint is served on the agent's metrics endpoint, under its authentication: these are
// the agent's flags that say where that listens and whether it is HTTPS, and the address's
// default. The plugin reads them from the agent's pod.
const (
	MetricsAddressFlag    = "metrics-bind-address"
	MetricsSecureFlag     = "metrics-secure"
	DefaultMetricsAddress = ":9090"
)

// Path is the pattern of the endpoint's one path: /proxy-config/<namespace>/<pod>. A caller needs
// get on it, a non-resource URL: the ClusterRole ReaderRole grants /proxy-config/* (every pod),
// a ClusterRole of one's own /proxy-config/<namespace>/* (one namespace's pods).
const Path = "/proxy-config/"

// ReaderRole is the ClusterRole the install ships for the endpoint, without the install's name
// prefix (aether-operator-proxy-config-reader in config/default).
const ReaderRole = "proxy-config-reader"

// PodPath is the path of pod namespace/name's configuration.
func PodPath(namespace, name string) string { return Path + namespace + "/" + name }

// MetricsPort is the port of a --metrics-bind-address value (host:port, :port); ok is false for
// "0", which turns the metrics endpoint, and so this one, off.
func MetricsPort(value string) (port int, ok bool, err error) {
	if value == "0" {
		return 0, false, nil
	}
	_, p, err := net.SplitHostPort(value)
	if err == nil {
		port, err = strconv.Atoi(p)
	}
	if err != nil || port < 1 || port > 65535 {
		return 0, false, fmt.Errorf("--%s %q is not [host]:port (%v)", MetricsAddressFlag, value, err)
	}
	return port, true, nil
}

// Config is one pod's part of its node's published configuration, as the endpoint serves it:
// each resource in protojson (Envoy's own JSON, its typed configs unpacked with their @type).
type Config struct {
	Node string `json:"node"`
	Pod  string `json:"pod"`
	// Versions are the node's snapshot's versions, by type URL.
	Versions  map[string]string `json:"versions"`
	Listeners []json.RawMessage `json:"listeners"`
	Routes    []json.RawMessage `json:"routes"`
	Clusters  []json.RawMessage `json:"clusters"`
	Endpoints []json.RawMessage `json:"endpoints"`
}

// Problem is the endpoint's answer when it has no configuration to show: why, in words.
type Problem struct {
	Error string `json:"error"`
}

// Encode is res (a pod's part, xds.PodResources) as the endpoint serves it.
func Encode(node, pod string, versions map[string]string, res xds.Resources) (Config, error) {
	c := Config{Node: node, Pod: pod, Versions: versions}
	var errs []error
	c.Listeners, errs = encodeAll(res.Listeners, errs)
	c.Routes, errs = encodeAll(res.Routes, errs)
	c.Clusters, errs = encodeAll(res.Clusters, errs)
	c.Endpoints, errs = encodeAll(res.Endpoints, errs)
	return c, errors.Join(errs...)
}

func encodeAll[T proto.Message](items []T, errs []error) ([]json.RawMessage, []error) {
	out := make([]json.RawMessage, 0, len(items))
	for _, m := range items {
		data, err := protojson.Marshal(m)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, data)
	}
	return out, errs
}

// Decode reads c's resources back into their messages (the plugin's summary reads them).
func (c Config) Decode() (xds.Resources, error) {
	var res xds.Resources
	var err error
	if res.Listeners, err = decodeAll[listenerv3.Listener](c.Listeners); err != nil {
		return res, fmt.Errorf("reading a listener: %w", err)
	}
	if res.Routes, err = decodeAll[routev3.RouteConfiguration](c.Routes); err != nil {
		return res, fmt.Errorf("reading a route configuration: %w", err)
	}
	if res.Clusters, err = decodeAll[clusterv3.Cluster](c.Clusters); err != nil {
		return res, fmt.Errorf("reading a cluster: %w", err)
	}
	if res.Endpoints, err = decodeAll[endpointv3.ClusterLoadAssignment](c.Endpoints); err != nil {
		return res, fmt.Errorf("reading a load assignment: %w", err)
	}
	return res, nil
}

func decodeAll[T any, P interface {
	*T
	proto.Message
}](items []json.RawMessage) ([]P, error) {
	out := make([]P, 0, len(items))
	for _, data := range items {
		m := P(new(T))
		if err := protojson.Unmarshal(data, m); err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

// Snapshots are the node's published configurations (xdsserver.Server).
type Snapshots interface {
	Published(nodeID string) (res xds.Resources, versions map[string]string, ok bool)
}

// Handler serves the endpoint for node: GET /proxy-config/<namespace>/<pod>. why, when set,
// says why the agent's last build left a pod out (empty: it did not, or it never saw it).
func Handler(node string, snapshots Snapshots, why func(namespace, name string) string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+Path+"{namespace}/{name}", func(w http.ResponseWriter, r *http.Request) {
		ns, name := r.PathValue("namespace"), r.PathValue("name")
		pod := ns + "/" + name
		res, versions, ok := snapshots.Published(node)
		if !ok {
			problem(w, http.StatusServiceUnavailable, fmt.Sprintf("the agent on node %s has published no configuration yet: its caches are still syncing, or its first build failed (its log says why)", node))
			return
		}
		mine, err := xds.PodResources(res, ns, name)
		if err != nil {
			problem(w, http.StatusInternalServerError, fmt.Sprintf("reading pod %s's part of node %s's configuration: %v", pod, node, err))
			return
		}
		if len(mine.Listeners) == 0 {
			reason := "the agent renders no listener for it: it is not a meshed pod of this node"
			if why != nil {
				if w := why(ns, name); w != "" {
					reason = "the agent left it out of its last build: " + w
				}
			}
			problem(w, http.StatusNotFound, fmt.Sprintf("pod %s has no proxy configuration on node %s: %s", pod, node, reason))
			return
		}
		c, err := Encode(node, pod, versions, mine)
		if err != nil {
			problem(w, http.StatusInternalServerError, fmt.Sprintf("encoding pod %s's configuration: %v", pod, err))
			return
		}
		write(w, http.StatusOK, c)
	})
	return mux
}

func problem(w http.ResponseWriter, status int, msg string) { write(w, status, Problem{Error: msg}) }

func write(w http.ResponseWriter, status int, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(data)
}
