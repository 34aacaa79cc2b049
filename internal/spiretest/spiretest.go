// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Package spiretest starts a real SPIRE — spire-server and spire-agent v1.13.3, the binaries
// hack/build-spire.sh builds from the Go module proxy into the versioned cache — as processes for
// a package's tests, on unix sockets and a loopback port:
//
//   - the server: SQLite datastore, in-memory keys, join_token node attestation, its API on
//     Env.ServerSocket (entry/v1, bundle/v1, ...; a caller on the socket is an admin);
//   - one agent, attested by a join token whose alias is Env.NodeAlias (so entries parented to
//     the alias are the agent's, as entries parented to the node agents' alias are in a cluster),
//     with the unix workload attestor, the Workload API on Env.WorkloadSocket and the Delegated
//     Identity API on Env.AdminSocket;
//   - Env.Delegate, the one authorized delegate: an entry for this test process's uid
//     (unix:uid:<uid>), so the test process may call the Delegated Identity API as the node
//     agent does in a cluster. Start returns once the agent serves it.
//
// Entries with k8s selectors (k8s:ns:<ns>, k8s:sa:<sa>) parented to the alias are what the
// Delegated Identity API hands out for those selectors: no kubelet is needed for that.
package spiretest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/workloadapi"
	entryv1 "github.com/spiffe/spire-api-sdk/proto/spire/api/server/entry/v1"
	"github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/aether-mesh/aether-operator/internal/identity"
	"github.com/aether-mesh/aether-operator/internal/testenv"
)

// startTimeout bounds each wait of Start: the server's and the agent's readiness, the delegate's
// SVID (the agent syncs its entries every 5 s).
const startTimeout = time.Minute

// Options are what a test may choose; the zero value is fine.
type Options struct {
	// TrustDomain is the SPIFFE trust domain (default "cluster.local", the mesh's default domain).
	TrustDomain string
	// SVIDTTL is the X.509 SVIDs' lifetime (default 1h); short values exercise rotation (SPIRE
	// rotates at half of it). SPIRE refuses less than its CA's rotation allows, about a minute.
	SVIDTTL time.Duration
}

// Env is a running SPIRE.
type Env struct {
	TrustDomain spiffeid.TrustDomain
	// ServerSocket is the server API's unix socket (a path, not a URI).
	ServerSocket string
	// WorkloadSocket is the agent's Workload API (a path).
	WorkloadSocket string
	// AdminSocket is the agent's admin API: the Delegated Identity API (a path).
	AdminSocket string
	// NodeAlias is the agent's alias ID: parent of the entries the agent serves.
	NodeAlias spiffeid.ID
	// Delegate is the SPIFFE ID authorized to use the Delegated Identity API: this process's.
	Delegate spiffeid.ID
	// Dir holds the configurations, data and logs (server.log, agent.log).
	Dir string
}

// Binaries returns the directory holding spire-server and spire-agent: $AETHER_SPIRE_BIN when
// set, else the cache hack/build-spire.sh fills (building it on first use).
func Binaries() (string, error) {
	if dir := os.Getenv("AETHER_SPIRE_BIN"); dir != "" {
		return dir, nil
	}
	cmd := exec.Command("bash", filepath.Join(testenv.RepoRoot(), "hack", "build-spire.sh"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("hack/build-spire.sh: %w\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return lines[len(lines)-1], nil
}

// Start runs a SPIRE server and agent until the test ends.
func Start(t testing.TB, o Options) *Env {
	t.Helper()
	bin, err := Binaries()
	if err != nil {
		t.Fatal(err)
	}
	if o.TrustDomain == "" {
		o.TrustDomain = "cluster.local"
	}
	if o.SVIDTTL == 0 {
		o.SVIDTTL = time.Hour
	}
	td, err := spiffeid.TrustDomainFromString(o.TrustDomain)
	if err != nil {
		t.Fatalf("spiretest: trust domain %q: %v", o.TrustDomain, err)
	}
	// Unix socket paths must stay under 108 bytes: a short directory, not t.TempDir's.
	dir, err := os.MkdirTemp("", "spire")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	e := &Env{
		TrustDomain:    td,
		ServerSocket:   filepath.Join(dir, "server", "api.sock"),
		WorkloadSocket: filepath.Join(dir, "workload", "agent.sock"),
		// SPIRE refuses an admin socket in the Workload API socket's directory.
		AdminSocket: filepath.Join(dir, "admin", "admin.sock"),
		NodeAlias:   identity.NodeAlias(td),
		Delegate:    spiffeid.RequireFromPath(td, "/aether/test-delegate"),
		Dir:         dir,
	}
	for _, d := range []string{"server", "workload", "admin", "server-data", "agent-data"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()

	port := freePort(t)
	e.startServer(t, bin, port, o.SVIDTTL)
	e.waitHealthy(ctx, t, bin, "spire-server", e.ServerSocket)
	token := e.joinToken(ctx, t, bin)
	e.startAgent(t, bin, port, token)
	e.waitHealthy(ctx, t, bin, "spire-agent", e.WorkloadSocket)
	e.CreateEntry(t, e.Delegate, e.NodeAlias, "unix:uid:"+strconv.Itoa(os.Getuid()))
	e.waitDelegate(ctx, t)
	return e
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func (e *Env) startServer(t testing.TB, bin string, port int, svidTTL time.Duration) {
	conf := fmt.Sprintf(`server {
  bind_address = "127.0.0.1"
  bind_port = "%d"
  socket_path = %q
  trust_domain = %q
  data_dir = %q
  log_level = "INFO"
  default_x509_svid_ttl = %q
}
plugins {
  DataStore "sql" {
    plugin_data {
      database_type = "sqlite3"
      connection_string = %q
    }
  }
  KeyManager "memory" {
    plugin_data {}
  }
  NodeAttestor "join_token" {
    plugin_data {}
  }
}
`, port, e.ServerSocket, e.TrustDomain.Name(), filepath.Join(e.Dir, "server-data"), svidTTL.String(),
		filepath.Join(e.Dir, "server-data", "datastore.sqlite3"))
	e.run(t, bin, "spire-server", conf)
}

func (e *Env) startAgent(t testing.TB, bin string, port int, token string) {
	conf := fmt.Sprintf(`agent {
  data_dir = %q
  log_level = "INFO"
  server_address = "127.0.0.1"
  server_port = "%d"
  socket_path = %q
  admin_socket_path = %q
  trust_domain = %q
  insecure_bootstrap = true
  join_token = %q
  authorized_delegates = [%q]
}
plugins {
  NodeAttestor "join_token" {
    plugin_data {}
  }
  KeyManager "memory" {
    plugin_data {}
  }
  WorkloadAttestor "unix" {
    plugin_data {}
  }
}
`, filepath.Join(e.Dir, "agent-data"), port, e.WorkloadSocket, e.AdminSocket, e.TrustDomain.Name(), token, e.Delegate.String())
	e.run(t, bin, "spire-agent", conf)
}

// run starts name with conf until the test ends; its log is <Dir>/<name>.log, printed when the
// test fails.
func (e *Env) run(t testing.TB, bin, name, conf string) {
	t.Helper()
	confPath := filepath.Join(e.Dir, name+".conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(e.Dir, name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(bin, name), "run", "-config", confPath)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatalf("spiretest: starting %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = logFile.Close()
		if t.Failed() {
			if raw, err := os.ReadFile(logPath); err == nil {
				t.Logf("%s log (last 4 KiB):\n%s", name, tail(raw, 4096))
			}
		}
	})
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// waitHealthy polls `<name> healthcheck` on socket until it answers healthy.
func (e *Env) waitHealthy(ctx context.Context, t testing.TB, bin, name, socket string) {
	t.Helper()
	var last []byte
	for {
		out, err := exec.CommandContext(ctx, filepath.Join(bin, name), "healthcheck", "-socketPath", socket).CombinedOutput()
		if err == nil {
			return
		}
		last = out
		select {
		case <-ctx.Done():
			t.Fatalf("spiretest: %s not healthy within %s: %s", name, startTimeout, last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// joinToken makes a one-use join token whose agent gets the alias NodeAlias.
func (e *Env) joinToken(ctx context.Context, t testing.TB, bin string) string {
	t.Helper()
	out, err := exec.CommandContext(ctx, filepath.Join(bin, "spire-server"), "token", "generate",
		"-socketPath", e.ServerSocket, "-spiffeID", e.NodeAlias.String(), "-ttl", "600").CombinedOutput()
	if err != nil {
		t.Fatalf("spiretest: spire-server token generate: %v\n%s", err, out)
	}
	token, ok := strings.CutPrefix(strings.TrimSpace(string(out)), "Token: ")
	if !ok {
		t.Fatalf("spiretest: spire-server token generate said %q, not \"Token: <token>\"", out)
	}
	return token
}

// waitDelegate waits until the agent hands this process its delegate SVID: from then on, the
// Delegated Identity API accepts this process.
func (e *Env) waitDelegate(ctx context.Context, t testing.TB) {
	t.Helper()
	for {
		svid, err := workloadapi.FetchX509SVID(ctx, workloadapi.WithAddr("unix://"+e.WorkloadSocket))
		if err == nil && svid.ID == e.Delegate {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("spiretest: the agent did not issue the delegate SVID %s within %s (last: %v)", e.Delegate, startTimeout, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// ServerConn is a client connection to the server API (entries, bundles), closed when the test
// ends.
func (e *Env) ServerConn(t testing.TB) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+e.ServerSocket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// CreateEntry registers id under parent with selectors written type:value (k8s:ns:default) and
// returns the entry's ID.
func (e *Env) CreateEntry(t testing.TB, id, parent spiffeid.ID, selectors ...string) string {
	t.Helper()
	entry := &types.Entry{SpiffeId: apiID(id), ParentId: apiID(parent)}
	for _, s := range selectors {
		typ, value, ok := strings.Cut(s, ":")
		if !ok {
			t.Fatalf("spiretest: selector %q is not type:value", s)
		}
		entry.Selectors = append(entry.Selectors, &types.Selector{Type: typ, Value: value})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := entryv1.NewEntryClient(e.ServerConn(t)).BatchCreateEntry(ctx, &entryv1.BatchCreateEntryRequest{Entries: []*types.Entry{entry}})
	if err != nil {
		t.Fatalf("spiretest: creating entry %s: %v", id, err)
	}
	r := resp.Results[0]
	if codes.Code(r.Status.Code) != codes.OK {
		t.Fatalf("spiretest: creating entry %s: %s", id, r.Status.Message)
	}
	return r.Entry.Id
}

func apiID(id spiffeid.ID) *types.SPIFFEID {
	return &types.SPIFFEID{TrustDomain: id.TrustDomain().Name(), Path: id.Path()}
}
