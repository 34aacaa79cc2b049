// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/spiffe/go-spiffe/v2/bundle/x509bundle"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"

	"github.com/aether-mesh/aether-operator/internal/spiffetest"
	"github.com/aether-mesh/aether-operator/internal/spiretest"
	"github.com/aether-mesh/aether-operator/internal/testroot"
	"github.com/aether-mesh/aether-operator/internal/workloadidentity"
)

// These tests run the REAL binary against a REAL SPIRE (internal/spiretest: spire-server and
// spire-agent as processes, the agent's unix workload attestor). SPIRE attests a caller by its
// uid here (by its pod in a cluster): the harness registers this process's uid (root) as its
// delegate, so the binary runs as other uids, each its own workload, as a non-root container
// does.

// binary is the built aether-identity.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "aether-identity-")
	if err == nil {
		err = os.Chmod(dir, 0o755) // executable by the uids the tests run it as
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "aether-identity")
	if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build of aether-identity: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// The workloads' uids: one per subtest, so that each has its own entries. 65532 is the image's
// nonroot user.
const (
	gateUID    = 65532
	timeoutUID = 65533
	filesUID   = 65534
)

// TestWorkloadAPI drives the three commands against one SPIRE whose SVIDs live a minute (SPIRE
// rotates them at about half of that).
func TestWorkloadAPI(t *testing.T) {
	testroot.Require(t, "running the commands as other users")
	env := spiretest.Start(t, spiretest.Options{SVIDTTL: time.Minute})
	// The harness's directory is 0700 (os.MkdirTemp); a node's socket directory is a hostPath
	// that non-root containers traverse.
	if err := os.Chmod(env.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	socket := "unix://" + env.WorkloadSocket

	// SPIRE's agent makes its Workload API socket world-writable (0777): what lets the injected
	// containers run as non-root.
	if info, err := os.Stat(env.WorkloadSocket); err != nil || info.Mode().Perm() != 0o777 {
		t.Fatalf("the Workload API socket: %v, %v; want mode 0777 (non-root identity containers connect to it)", info.Mode(), err)
	}

	t.Run("wait holds the pod until its entry exists", func(t *testing.T) {
		t.Parallel()
		p := start(t, gateUID, "wait", "--socket", socket)
		// No entry matches the uid: the gate waits and says so, every LogInterval.
		line := p.waitForLine(t, "still no X.509 SVID after", 3*LogInterval)
		for _, want := range []string{"no registration entry matches this pod yet", "kubectl describe meshservice web -n shop",
			"spire-server entry show -selector k8s:ns:shop -selector k8s:sa:web"} {
			if !strings.Contains(line, want) {
				t.Errorf("the waiting line lacks %q:\n%s", want, line)
			}
		}
		if p.exited() {
			t.Fatalf("the gate exited while no entry matched it: %v\n%s", p.err, p.log())
		}
		id := spiffeid.RequireFromPath(env.TrustDomain, "/ns/shop/sa/web")
		env.CreateEntry(t, id, env.NodeAlias, "unix:uid:"+strconv.Itoa(gateUID))
		if err := p.wait(time.Minute); err != nil {
			t.Fatalf("the gate, once its entry exists: %v\n%s", err, p.log())
		}
		if !strings.Contains(p.log(), "got "+id.String()) {
			t.Errorf("the gate's log does not name the SVID it got (%s):\n%s", id, p.log())
		}
	})

	// The negative control: no entry ever matches; the gate fails closed at its timeout.
	t.Run("wait fails closed after its timeout", func(t *testing.T) {
		t.Parallel()
		p := start(t, timeoutUID, "wait", "--socket", socket, "--timeout", "3s")
		err := p.wait(time.Minute)
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != exitFailed {
			t.Fatalf("the gate without an entry: %v, want exit status %d\n%s", err, exitFailed, p.log())
		}
		want := "no X.509 SVID for this pod within --timeout=3s: failing closed"
		if !strings.Contains(p.log(), want) || !strings.Contains(p.log(), "no registration entry matches this pod yet") {
			t.Errorf("the gate's log lacks %q and why:\n%s", want, p.log())
		}
		t.Logf("the failure: %s", lastLine(p.log()))
	})

	t.Run("files are written and rotate with SPIRE", func(t *testing.T) {
		t.Parallel()
		id := spiffeid.RequireFromPath(env.TrustDomain, "/ns/shop/sa/grpc-client")
		env.CreateEntry(t, id, env.NodeAlias, "unix:uid:"+strconv.Itoa(filesUID))
		dir := emptyDir(t)
		p := start(t, filesUID, "files", "--socket", socket, "--dir", dir)

		first := waitForFiles(t, p, dir, func(*x509.Certificate) bool { return true })
		checkIssued(t, dir, id, env.TrustDomain)
		checkModes(t, dir)

		// SPIRE renews an SVID at about half of its life: the files follow, whole.
		second := waitForFiles(t, p, dir, func(c *x509.Certificate) bool { return c.SerialNumber.Cmp(first.SerialNumber) != 0 })
		checkIssued(t, dir, id, env.TrustDomain)
		checkModes(t, dir)
		if !second.NotAfter.After(first.NotAfter) {
			t.Errorf("the rotated SVID expires %v, not after the first's %v", second.NotAfter, first.NotAfter)
		}
		if n := strings.Count(p.log(), "wrote "+id.String()); n < 2 {
			t.Errorf("the log says %d writes of %s, want at least 2:\n%s", n, id, p.log())
		}
		if p.exited() {
			t.Fatalf("files exited: %v\n%s", p.err, p.log())
		}

		probeRefusesBrokenFiles(t, dir, env.TrustDomain)
	})
}

// probeRefusesBrokenFiles: the probe's negative controls, each a copy of the real files with one
// thing broken.
func probeRefusesBrokenFiles(t *testing.T, real string, td spiffeid.TrustDomain) {
	ca, err := spiffetest.NewCA(td.Name())
	if err != nil {
		t.Fatal(err)
	}
	_, foreignKey, err := ca.Issue(spiffeid.RequireFromPath(td, "/other").String())
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		file string
		data []byte
		want string
	}{
		"another key":                    {keyName, foreignKey, "are not an X.509 SVID and its key"},
		"another CA's bundle":            {bundleName, ca.BundlePEM, "does not chain to"},
		"no certificate":                 {certificateName, nil, "are not an X.509 SVID and its key"},
		"a bundle that is not a PEM":     {bundleName, []byte("not a bundle"), "is not a bundle of X.509 roots"},
		"the key where the cert must be": {certificateName, foreignKey, "are not an X.509 SVID and its key"},
	} {
		dir := t.TempDir()
		for _, f := range []string{certificateName, keyName, bundleName} {
			data, err := os.ReadFile(filepath.Join(real, f))
			if err != nil {
				t.Fatal(err)
			}
			if f == tc.file {
				data = tc.data
			}
			if data != nil {
				if err := os.WriteFile(filepath.Join(dir, f), data, 0o600); err != nil {
					t.Fatal(err)
				}
			}
		}
		out, err := exec.Command(binary, "probe", "--dir", dir).CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != exitFailed || !strings.Contains(string(out), tc.want) {
			t.Errorf("probe of %s: %v, %s; want exit status %d saying %q", name, err, out, exitFailed, tc.want)
			continue
		}
		t.Logf("probe of %s: %s", name, strings.TrimSpace(string(out)))
	}
}

// waitForFiles polls the real probe, run as the files' writer, until it passes on a
// certificate for which accept holds, and returns that certificate.
func waitForFiles(t *testing.T, p *process, dir string, accept func(*x509.Certificate) bool) *x509.Certificate {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	var last string
	for time.Now().Before(deadline) {
		out, err := runAs(filesUID, "probe", "--dir", dir)
		if err == nil {
			svid, err := x509svid.Load(filepath.Join(dir, certificateName), filepath.Join(dir, keyName))
			if err == nil && accept(svid.Certificates[0]) {
				return svid.Certificates[0]
			}
			last = fmt.Sprintf("probe passed on %v, not yet the certificate awaited (%v)", out, err)
		} else {
			last = fmt.Sprintf("%v: %s", err, out)
		}
		if p.exited() {
			t.Fatalf("files exited: %v\n%s", p.err, p.log())
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatalf("the files in %s did not come: %s\n%s", dir, last, p.log())
	return nil
}

// checkIssued: the files are id's SVID, its key, and a bundle it chains to, read as a TLS client
// would read them, independently of the probe.
func checkIssued(t *testing.T, dir string, id spiffeid.ID, td spiffeid.TrustDomain) {
	t.Helper()
	svid, err := x509svid.Load(filepath.Join(dir, certificateName), filepath.Join(dir, keyName))
	if err != nil {
		t.Fatal(err)
	}
	leaf := svid.Certificates[0]
	if len(leaf.URIs) != 1 || leaf.URIs[0].String() != id.String() {
		t.Errorf("the certificate's URI SANs are %v, want [%s]", leaf.URIs, id)
	}
	bundle, err := x509bundle.Load(td, filepath.Join(dir, bundleName))
	if err != nil {
		t.Fatal(err)
	}
	roots, intermediates := x509.NewCertPool(), x509.NewCertPool()
	for _, c := range bundle.X509Authorities() {
		roots.AddCert(c)
	}
	for _, c := range svid.Certificates[1:] {
		intermediates.AddCert(c)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: intermediates,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("the certificate does not chain to bundle.pem as a client certificate: %v", err)
	}
}

// checkModes: exactly the three files, owned by the writer, the key 0640 and the others 0644
// (no temporary file left behind).
func checkModes(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]os.FileMode{certificateName: 0o644, keyName: 0o640, bundleName: 0o644}
	if len(entries) != len(want) {
		t.Errorf("%s holds %v, want exactly %v", dir, entries, want)
	}
	for name, mode := range want {
		info, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Error(err)
			continue
		}
		if info.Mode().Perm() != mode || info.Sys().(*syscall.Stat_t).Uid != filesUID {
			t.Errorf("%s: mode %v, uid %d; want %v, uid %d", name, info.Mode().Perm(), info.Sys().(*syscall.Stat_t).Uid, mode, filesUID)
		}
	}
}

// emptyDir is a directory anyone may write, as an emptyDir volume is.
func emptyDir(t *testing.T) string {
	dir, err := os.MkdirTemp("", "identity-files-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	return dir
}

// as makes cmd run as uid (and gid), as a non-root container of its own workload.
func as(cmd *exec.Cmd, uid int) *exec.Cmd {
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	cmd.Env = append(os.Environ(), workloadidentity.EnvNamespace+"=shop", workloadidentity.EnvServiceAccount+"=web", workloadidentity.EnvNodeName+"=node-a")
	return cmd
}

// runAs runs the binary with args as uid and returns its output.
func runAs(uid int, args ...string) (string, error) {
	out, err := as(exec.Command(binary, args...), uid).CombinedOutput()
	return string(out), err
}

// process is the binary running in the background, its stderr kept.
type process struct {
	cmd  *exec.Cmd
	out  lockedBuffer
	done chan struct{}
	err  error // once done is closed
}

// start runs the binary with args as uid until the test ends.
func start(t *testing.T, uid int, args ...string) *process {
	t.Helper()
	p := &process{cmd: as(exec.Command(binary, args...), uid), done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("aether-identity %s log:\n%s", args[0], p.log())
		}
	})
	return p
}

func (p *process) log() string { return p.out.String() }

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// wait waits for the process to exit and returns its error.
func (p *process) wait(timeout time.Duration) error {
	select {
	case <-p.done:
		return p.err
	case <-time.After(timeout):
		return fmt.Errorf("still running after %v", timeout)
	}
}

// waitForLine polls the log until a line holds substr, and returns that line.
func (p *process) waitForLine(t *testing.T, substr string, timeout time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		for line := range strings.SplitSeq(p.log(), "\n") {
			if strings.Contains(line, substr) {
				return line
			}
		}
		if p.exited() {
			t.Fatalf("exited (%v) before logging %q:\n%s", p.err, substr, p.log())
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("no line with %q within %v:\n%s", substr, timeout, p.log())
	return ""
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// lockedBuffer is a bytes.Buffer written by the process's output copier and read by the test.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
