// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/google/pprof/profile"

	"github.com/aether-mesh/aether-operator/internal/testenv"
)

// manager is one run of the manager binary.
type manager struct {
	cmd     *exec.Cmd
	log     string
	metrics string        // base URL of its metrics endpoint
	pprof   string        // base URL of its pprof endpoint
	done    chan struct{} // closed when the process has exited, with its error in exit
	exit    error
	stopped sync.Once
}

// startManager runs bin as the manager user (kubeconfig) with the benchmark's tuning, its
// webhook server on loopback under a throwaway certificate (no webhook is installed: the pods
// here come from the benchmark), metrics and pprof on loopback, logging to logPath. It returns
// once the metrics endpoint answers.
func startManager(ctx context.Context, bin, kubeconfig, certDir, logPath string, cfg config) (*manager, error) {
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	m := &manager{log: logPath, metrics: fmt.Sprintf("http://127.0.0.1:%d/metrics", ports[0]),
		pprof: fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/", ports[1]), done: make(chan struct{})}
	args := append([]string{
		"--kubeconfig=" + kubeconfig,
		"--health-probe-bind-address=0",
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", ports[0]), "--metrics-secure=false",
		fmt.Sprintf("--pprof-bind-address=127.0.0.1:%d", ports[1]),
		"--webhook-host=127.0.0.1", fmt.Sprintf("--webhook-port=%d", ports[2]), "--webhook-cert-dir=" + certDir,
		fmt.Sprintf("--max-concurrent-reconciles=%d", cfg.workers),
		fmt.Sprintf("--kube-api-qps=%v", cfg.qps), fmt.Sprintf("--kube-api-burst=%d", cfg.burst),
		"--batch-window=" + cfg.window.String(),
	}, cfg.managerArgs...)
	m.cmd = exec.Command(bin, args...)
	m.cmd.Stdout, m.cmd.Stderr = logFile, logFile
	if err := m.cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("starting the manager: %w", err)
	}
	go func() { m.exit = m.cmd.Wait(); _ = logFile.Close(); close(m.done) }()
	deadline := time.Now().Add(time.Minute)
	for {
		if _, err := m.scrape(ctx); err == nil {
			return m, nil
		}
		select {
		case <-m.done:
			return nil, fmt.Errorf("the manager exited at start (%v); its log is %s", m.exit, logPath)
		case <-ctx.Done():
			m.stop()
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			m.stop()
			return nil, fmt.Errorf("the manager's metrics endpoint did not answer within a minute; its log is %s", logPath)
		}
	}
}

// stop ends the manager as Kubernetes does (SIGTERM) and waits for it.
func (m *manager) stop() {
	m.stopped.Do(func() {
		_ = m.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-m.done:
		case <-time.After(30 * time.Second):
			_ = m.cmd.Process.Kill()
			<-m.done
		}
	})
}

// scrape reads the manager's metrics: each series (name and labels as written) to its value.
func (m *manager) scrape(ctx context.Context) (map[string]float64, error) {
	return scrape(ctx, m.metrics)
}

// scrape reads a Prometheus text endpoint (the manager's, the agent's): each series (name and
// labels as written) to its value.
func scrape(ctx context.Context, url string) (map[string]float64, error) {
	body, err := get(ctx, url)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	scanner := bufio.NewScanner(bytes.NewReader(body))
	for scanner.Scan() {
		line := scanner.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		cut := strings.LastIndexByte(line, ' ')
		value, err := strconv.ParseFloat(line[cut+1:], 64)
		if err != nil {
			continue
		}
		out[line[:cut]] = value
	}
	return out, scanner.Err()
}

// sum adds the series of metric name; a name ending in labels (`name{label="value"`) adds the
// series that start with them.
func sum(series map[string]float64, name string) float64 {
	total := 0.0
	for s, v := range series {
		if s == name || strings.HasPrefix(s, name+"{") || strings.Contains(name, "{") && strings.HasPrefix(s, name) {
			total += v
		}
	}
	return total
}

// waitIdle waits until the manager has nothing to do: its MeshService controller has reconciled
// at least atLeast times (a restarted manager reconciles every service once: until then it may
// just be filling its caches, quiet but not idle), no request is queued, in a worker or held
// back by the batching window (aether_controller_settling_services), and no reconcile or queue
// add happened for quiet (longer than the delay the manager requeues with after a race).
func (m *manager) waitIdle(ctx context.Context, quiet, timeout time.Duration, atLeast int) error {
	deadline := time.Now().Add(timeout)
	var last [3]float64
	since := time.Now()
	for {
		series, err := m.scrape(ctx)
		if err != nil {
			return fmt.Errorf("reading the manager's metrics: %w", err)
		}
		reconciled := sum(series, `controller_runtime_reconcile_total{controller="meshservice"`)
		busy := sum(series, "workqueue_depth") + sum(series, "controller_runtime_active_workers") +
			sum(series, "aether_controller_settling_services")
		// Retries count the adds held back for a while (the batching window, a requeue after a
		// race): such an item is not in the queue's depth until it is due.
		now := [3]float64{sum(series, "controller_runtime_reconcile_total"), sum(series, "workqueue_adds_total"),
			sum(series, "workqueue_retries_total")}
		if busy > 0 || now != last || reconciled < float64(atLeast) {
			last, since = now, time.Now()
		} else if time.Since(since) >= quiet {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the manager was still busy after %s (%v queued or working, %v of at least %d reconciles)",
				timeout, busy, reconciled, atLeast)
		}
		if err := m.pause(ctx); err != nil {
			return err
		}
	}
}

// pause waits 200 ms before the next look at the manager, or says why there will be none: the
// manager exited, or ctx ended.
func (m *manager) pause(ctx context.Context) error {
	select {
	case <-m.done:
		return fmt.Errorf("the manager exited (%v); its log is %s", m.exit, m.log)
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(200 * time.Millisecond):
		return nil
	}
}

// waitForSeries scrapes the manager until it exports the series name (with its labels, as the
// scrape's keys spell it).
func (m *manager) waitForSeries(ctx context.Context, name string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		series, err := m.scrape(ctx)
		if err != nil {
			return fmt.Errorf("reading the manager's metrics: %w", err)
		}
		if _, ok := series[name]; ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the manager exported no %s within %s; its log is %s", name, timeout, m.log)
		}
		if err := m.pause(ctx); err != nil {
			return err
		}
	}
}

// races reads the manager's quiet requeues after a race with another writer or its cache, by
// race (aether_controller_races_requeued_total).
func (m *manager) races(ctx context.Context) (tally, error) {
	series, err := m.scrape(ctx)
	if err != nil {
		return nil, err
	}
	out := tally{}
	for s, v := range series {
		if rest, ok := strings.CutPrefix(s, "aether_controller_races_requeued_total{"); ok && v > 0 {
			out[strings.TrimSuffix(rest, "}")] += int(v)
		}
	}
	return out, nil
}

// cpuSeconds is the manager's user and system CPU time so far.
func (m *manager) cpuSeconds() (float64, error) { return testenv.CPUSeconds(m.cmd.Process.Pid) }

// peakRSSMiB is the manager's peak resident memory so far (VmHWM).
func (m *manager) peakRSSMiB() (float64, error) { return testenv.MemoryMiB(m.cmd.Process.Pid, "VmHWM") }

// reconcileErrors counts the "Reconciler error" lines of the manager's log.
func (m *manager) reconcileErrors() (int, error) {
	raw, err := os.ReadFile(m.log)
	return bytes.Count(raw, []byte("Reconciler error")), err
}

// cpuProfiler takes consecutive CPU profiles of the manager until stopped, and merges them: a
// profile of exactly the span profiled, however long convergence takes.
type cpuProfiler struct {
	stop   chan struct{}
	cancel context.CancelFunc // the slice under way
	done   chan error
	got    []*profile.Profile
}

// profileSlice is the length of one CPU profile request: the profile is the merge of the slices.
// The slice under way when the profiler stops is dropped: it began after the manager's last
// activity (waitIdle's quiet is longer), so it holds only idle time.
const profileSlice = time.Second

func (m *manager) profileCPU(ctx context.Context) *cpuProfiler { return profileCPU(ctx, m.pprof) }

// profileCPU profiles the process whose pprof endpoints are at base (manager.profileCPU).
func profileCPU(ctx context.Context, base string) *cpuProfiler {
	return profileCPUVia(ctx, http.DefaultClient, base)
}

// profileCPUVia is profileCPU through c: the API server's pprof endpoints need its admin's
// credentials.
func profileCPUVia(ctx context.Context, c *http.Client, base string) *cpuProfiler {
	ctx, cancel := context.WithCancel(ctx)
	p := &cpuProfiler{stop: make(chan struct{}), cancel: cancel, done: make(chan error, 1)}
	go func() {
		for {
			select {
			case <-p.stop:
				p.done <- nil
				return
			default:
			}
			body, err := getVia(ctx, c, fmt.Sprintf("%sprofile?seconds=%d", base, int(profileSlice.Seconds())))
			if ctx.Err() != nil { // stopped (finish) while this slice was under way
				p.done <- nil
				return
			}
			if err != nil {
				p.done <- fmt.Errorf("taking a CPU profile: %w", err)
				return
			}
			prof, err := profile.ParseData(body)
			if err != nil {
				p.done <- fmt.Errorf("reading a CPU profile: %w", err)
				return
			}
			p.got = append(p.got, prof)
		}
	}()
	return p
}

// finish stops profiling, dropping the slice under way, and writes the merged profile to path.
func (p *cpuProfiler) finish(path string) error {
	close(p.stop)
	p.cancel()
	if err := <-p.done; err != nil {
		return err
	}
	if len(p.got) == 0 {
		return fmt.Errorf("no CPU profile was taken")
	}
	merged, err := profile.Merge(p.got)
	if err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := merged.Write(f); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// heapProfile writes the manager's heap profile (after a GC) to path.
func (m *manager) heapProfile(ctx context.Context, path string) error {
	body, err := get(ctx, m.pprof+"heap?gc=1")
	if err != nil {
		return err
	}
	return os.WriteFile(path, body, 0o644)
}

// topOf writes `go tool pprof -top` of a profile next to it (<profile>.top.txt).
func topOf(ctx context.Context, bin, path string, extra ...string) error {
	args := append([]string{"tool", "pprof", "-top", "-nodecount=25"}, extra...)
	if bin != "" { // a Go profile names its functions: the binary adds its source lines
		args = append(args, bin)
	}
	args = append(args, path)
	out, err := exec.CommandContext(ctx, "go", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("go tool pprof -top %s: %w\n%s", path, err, out)
	}
	return os.WriteFile(strings.TrimSuffix(path, filepath.Ext(path))+".top.txt", out, 0o644)
}

func get(ctx context.Context, url string) ([]byte, error) {
	return getVia(ctx, http.DefaultClient, url)
}

func getVia(ctx context.Context, c *http.Client, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
	}
	return body, nil
}

// firstHarnessPort is where the harness's own ports start: below Linux's default ephemeral range
// (32768-60999), where no outgoing connection takes a port. A port picked from that range and
// closed until its process binds it can be taken in between by any connection an agent opens, or
// handed out again: twenty agents starting together once failed a run with "address already in
// use" for an agent's metrics port.
const firstHarnessPort = 21000

// nextHarnessPort is the next port freePorts tries; each port is handed out once per run.
var nextHarnessPort atomic.Int32

func init() { nextHarnessPort.Store(firstHarnessPort) }

// freePorts picks n loopback ports that no other call of this run got, each free when picked.
func freePorts(n int) ([]int, error) {
	var out []int
	for len(out) < n {
		port := int(nextHarnessPort.Add(1) - 1)
		if port >= 32768 {
			return nil, fmt.Errorf("no free loopback port left in %d-32767", firstHarnessPort)
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue // taken by another process: try the next
		}
		_ = l.Close()
		out = append(out, port)
	}
	return out, nil
}

// writeServingCert writes a throwaway self-signed certificate for 127.0.0.1 into dir (tls.crt,
// tls.key): the manager's webhook server needs one to start; no API server calls it here.
func writeServingCert(dir string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	now := time.Now()
	template := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "aether bench webhook"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, template, template, &key.PublicKey, key)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "tls.key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600)
}
