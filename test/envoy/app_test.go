// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package envoy_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aether-mesh/aether-operator/hack/testapp"
	"github.com/aether-mesh/aether-operator/internal/capture/apply/nstest"
)

// A pod's application is a process of its own in the pod's network namespace, as a container's
// is: this test binary started again with appEnv set, serving hack/testapp's servers on the pod's
// address until its standard input closes (the test ended, or died). Its own process, because Go's
// HTTP/2 server takes an extended CONNECT (a WebSocket over the mesh's HTTP/2 hop to an h2 port)
// only when GODEBUG says http2xconnect=1 as the process starts.

// appEnv carries the servers an application process runs (appSpec, JSON).
const appEnv = "AETHER_LIVE_APP"

// appSpec is one pod's servers: on Host, an HTTP/1.1 server per HTTP port, an h2c server (which
// takes HTTP/1.1 too) per HTTP/2 port, and a server-first TCP server (its greeting, then an echo)
// per TCP port.
type appSpec struct {
	Host  string
	HTTP  []int
	H2C   []int
	Hello []int
	// FailHealth makes the health path answer 503 (testapp.Ports.FailHealth).
	FailHealth bool
	// Fortio serves fortio's servers instead (the data-plane benchmark's load answers them): its
	// echo server on the HTTP ports, its gRPC ping server on the HTTP/2 ports, its TCP echo
	// server on the TCP ports.
	Fortio bool
}

// appReady is the line an application process writes once every server listens.
const appReady = "ready"

func TestMain(m *testing.M) {
	if spec := os.Getenv(appEnv); spec != "" {
		os.Exit(runApp(spec))
	}
	if spec := os.Getenv(loadEnv); spec != "" {
		os.Exit(runLoadProcess(spec))
	}
	os.Exit(m.Run())
}

// runApp serves spec until standard input closes.
func runApp(spec string) int {
	var s appSpec
	if err := json.Unmarshal([]byte(spec), &s); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", appEnv, err)
		return 2
	}
	if s.Fortio {
		return serveFortio(s)
	}
	closers, err := testapp.Serve(s.Host, testapp.Ports{HTTP: s.HTTP, H2C: s.H2C, Hello: s.Hello, HealthPath: "/healthz", FailHealth: s.FailHealth})
	if err != nil {
		fmt.Fprintf(os.Stderr, "serving %+v: %v\n", s, err)
		return 1
	}
	fmt.Println(appReady)
	_, _ = io.Copy(io.Discard, os.Stdin)
	for _, c := range closers {
		_ = c.Close()
	}
	return 0
}

// selfIn is this test binary to be run again in ns (ip netns exec), and spec in JSON, which the
// caller passes in its environment: an application's or a load's process.
func selfIn(t testing.TB, ns *nstest.NS, spec any) (*exec.Cmd, []byte) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	encoded, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	return exec.Command("ip", "netns", "exec", ns.Name, self), encoded
}

// startApp runs spec's servers in ns and returns once they listen; they stop when t ends.
func startApp(t testing.TB, ns *nstest.NS, spec appSpec) {
	t.Helper()
	cmd, encoded := selfIn(t, ns, spec)
	godebug := "http2xconnect=1"
	if g := os.Getenv("GODEBUG"); g != "" {
		godebug = g + "," + godebug
	}
	cmd.Env = append(os.Environ(), appEnv+"="+string(encoded), "GODEBUG="+godebug)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting the application of %s: %v", ns.Name, err)
	}
	// exited is closed once the process is gone (its status says nothing the test reads: it is
	// stopped by the test, or has already failed to say it is ready).
	exited := make(chan struct{})
	t.Cleanup(func() {
		_ = stdin.Close()
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	ready := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		ready <- strings.TrimSpace(line)
		_, _ = io.Copy(io.Discard, stdout)
		_ = cmd.Wait()
		close(exited)
	}()
	select {
	case line := <-ready:
		if line != appReady {
			t.Fatalf("the application of %s (%+v) did not start: %q %s", ns.Name, spec, line, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the application of %s (%+v) is not ready after 30 s: %s", ns.Name, spec, stderr.String())
	}
}
