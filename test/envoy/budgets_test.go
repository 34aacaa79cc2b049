// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package envoy_test

import (
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/aether-mesh/aether-operator/internal/xds"
	"github.com/aether-mesh/aether-operator/internal/xds/xdstest"
)

// TestCircuitBreakersAreTheNodes reads, from the live Envoy's /clusters, the circuit breakers it
// applies to every cluster of a node: none may be below the node's own budget
// (xds.ClusterCircuitBreaker). Envoy's defaults (1 024 connections, pending and active requests,
// 3 retries) capped the node's whole non-mesh egress at 1 024 connections through the one
// passthrough cluster. It failed while a cluster kept them: "blackhole: max_connections is 1024,
// want 50000", "blackhole: max_retries is 3, want 50000".
func TestCircuitBreakersAreTheNodes(t *testing.T) {
	n := startNode(t, xdstest.All()["mixed-http-primary"], false)
	n.requireAccepted(t)
	body, err := n.envoy.Get("/clusters")
	if err != nil {
		t.Fatal(err)
	}
	// Lines of the form <cluster>::default_priority::max_connections::<n>.
	limits := map[string]map[string]int{}
	for line := range strings.SplitSeq(string(body), "\n") {
		parts := strings.Split(line, "::")
		if len(parts) != 4 || parts[1] != "default_priority" {
			continue
		}
		v, err := strconv.Atoi(parts[3])
		if err != nil {
			t.Fatalf("/clusters line %q: %v", line, err)
		}
		if limits[parts[0]] == nil {
			limits[parts[0]] = map[string]int{}
		}
		limits[parts[0]][parts[2]] = v
	}
	checked := 0
	for _, c := range n.res.Clusters {
		got := limits[c.GetName()]
		if got == nil {
			t.Errorf("%s: /clusters shows no thresholds for it", c.GetName())
			continue
		}
		for _, threshold := range []string{"max_connections", "max_pending_requests", "max_requests", "max_retries"} {
			if got[threshold] != xds.ClusterCircuitBreaker {
				t.Errorf("%s: %s is %d, want %d", c.GetName(), threshold, got[threshold], xds.ClusterCircuitBreaker)
			}
		}
		checked++
	}
	if checked == 0 {
		t.Fatal("no cluster checked: the test proves nothing")
	}
	t.Logf("%d clusters at %d each", checked, xds.ClusterCircuitBreaker)
}

// TestHTTP2IsBoundedAndHeapWatched reads what the live Envoy tells an HTTP/2 client of a pod's
// capture listener in its first SETTINGS frame and window update: at most
// xds.HTTP2MaxConcurrentStreams streams, a stream window of xds.HTTP2StreamWindow and a connection
// window of xds.HTTP2ConnectionWindow (left to Envoy 1.40's defaults it said 16 MiB and 24 MiB:
// "SETTINGS_INITIAL_WINDOW_SIZE 16777216, want 65536", "the connection window is 25165824, want
// 1048576"); and
// that its overload manager watches the heap: the fixed_heap monitor's pressure and the two heap
// actions are among its statistics.
func TestHTTP2IsBoundedAndHeapWatched(t *testing.T) {
	lm := startMesh(t, xdstest.Scenarios()["mixed-http-primary"], nil)
	lc, ok := firstHTTPCase(t, lm, func(liveCase) bool { return true })
	if !ok {
		t.Fatal("no HTTP/1.1 case on port 8080: the test proves nothing")
	}
	client := lm.fabric.pods[xds.PodKey(lc.Client.Namespace, lc.Client.Name)]
	var c net.Conn
	var err error
	address := net.JoinHostPort(lc.conn.DstIP, strconv.Itoa(int(lc.conn.DstPort)))
	if doErr := client.Do(func() { c, err = net.DialTimeout("tcp", address, 5*time.Second) }); doErr != nil || err != nil {
		t.Fatalf("dialling %s from %s: %v %v", address, lc.Client.Name, doErr, err)
	}
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(c, c)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	settings := map[http2.SettingID]uint32{}
	var connectionWindow uint32 = 65535 // HTTP/2's initial connection window, before updates
	for sawSettings, sawUpdate := false, false; !sawSettings || !sawUpdate; {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("reading the proxy's first frames (settings %v, update %v): %v", sawSettings, sawUpdate, err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if f.IsAck() {
				continue
			}
			_ = f.ForeachSetting(func(s http2.Setting) error { settings[s.ID] = s.Val; return nil })
			sawSettings = true
		case *http2.WindowUpdateFrame:
			if f.StreamID == 0 {
				connectionWindow += f.Increment
				sawUpdate = true
			}
		}
	}
	t.Logf("%s's capture listener, through %s: settings %v, connection window %d", lc.Client.Name, address, settings, connectionWindow)
	if got := settings[http2.SettingMaxConcurrentStreams]; got != xds.HTTP2MaxConcurrentStreams {
		t.Errorf("SETTINGS_MAX_CONCURRENT_STREAMS %d, want %d", got, xds.HTTP2MaxConcurrentStreams)
	}
	if got := settings[http2.SettingInitialWindowSize]; got != xds.HTTP2StreamWindow {
		t.Errorf("SETTINGS_INITIAL_WINDOW_SIZE %d, want %d", got, xds.HTTP2StreamWindow)
	}
	if connectionWindow != xds.HTTP2ConnectionWindow {
		t.Errorf("the connection window is %d, want %d", connectionWindow, xds.HTTP2ConnectionWindow)
	}

	stats, err := lm.nodes[xdstest.ThisNode].envoy.Get("/stats")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"overload.envoy.resource_monitors.fixed_heap.pressure", "overload.envoy.overload_actions.shrink_heap.active",
		"overload.envoy.overload_actions.stop_accepting_requests.active"} {
		if !strings.Contains(string(stats), "\n"+name+": ") && !strings.HasPrefix(string(stats), name+": ") {
			t.Errorf("the node Envoy's statistics have no %s: its overload manager does not watch the heap", name)
		}
	}
}
