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
//
// With Options.PSAT the server also admits agents by k8s_psat, as in a cluster, against a real
// API server (TokenReview, then the token's pod and its node): StartNodeAgent runs one more agent
// per node, whose SPIFFE ID is spiffe://<td>/spire/agent/k8s_psat/<cluster>/<node UID>, so that a
// test tells nodes apart as SPIRE does.
package spiretest

import (
	"bytes"
	"context"
	"crypto/x509"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/workloadapi"
	delegatedv1 "github.com/spiffe/spire-api-sdk/proto/spire/api/agent/delegatedidentity/v1"
	entryv1 "github.com/spiffe/spire-api-sdk/proto/spire/api/server/entry/v1"
	"github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/aether-mesh/aether-operator/internal/testenv"
	"github.com/aether-mesh/aether-operator/internal/workloadidentity"
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
	// PSAT, when set, makes the server attest agents by k8s_psat too (StartNodeAgent).
	PSAT *PSAT
}

// PSAT is the k8s_psat cluster the server admits.
type PSAT struct {
	// Cluster is the cluster's name in SPIRE's configuration (the agent's and the server's).
	Cluster string
	// Kubeconfig reaches the cluster's API server, for TokenReviews and reading pods and nodes.
	Kubeconfig string
	// ServiceAccount (namespace:name) is the only one whose pods' tokens may attest an agent.
	ServiceAccount string
}

// Agent is a SPIRE agent StartNodeAgent runs.
type Agent struct {
	// ID is the agent's SPIFFE ID.
	ID spiffeid.ID
	// WorkloadSocket is its Workload API and AdminSocket its Delegated Identity API (paths).
	WorkloadSocket, AdminSocket string
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

	bin         string
	port        int
	psatCluster string
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
		NodeAlias:   workloadidentity.NodeAlias(td),
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

	e.bin, e.port = bin, freePort(t)
	e.startServer(t, o.SVIDTTL, o.PSAT)
	e.waitHealthy(ctx, t, "spire-server", e.ServerSocket)
	token := e.joinToken(ctx, t)
	e.startAgent(t, "spire-agent", "agent-data", e.WorkloadSocket, e.AdminSocket, `NodeAttestor "join_token" {
    plugin_data {}
  }`, fmt.Sprintf("join_token = %q", token))
	e.waitHealthy(ctx, t, "spire-agent", e.WorkloadSocket)
	e.CreateEntry(t, e.Delegate, e.NodeAlias, e.delegateSelector())
	e.waitDelegate(ctx, t, e.WorkloadSocket)
	return e
}

// delegateSelector selects this test process on an agent's Workload API (unix attestor).
func (e *Env) delegateSelector() string { return "unix:uid:" + strconv.Itoa(os.Getuid()) }

// StartNodeAgent runs, until the test ends, one more agent, called name, attested by k8s_psat
// (Options.PSAT) with token: a ServiceAccount token bound to a pod of PSAT.ServiceAccount,
// audience spire-server, as the kubelet projects it into a SPIRE agent's pod. The server makes
// the agent's ID of the pod's node: id must be that ID (the test knows the node's UID). It
// registers Delegate under id and returns once the agent serves it: its Delegated Identity API
// then accepts this process, and the agent's ID is id.
func (e *Env) StartNodeAgent(t testing.TB, name, token string, id spiffeid.ID) *Agent {
	t.Helper()
	if e.psatCluster == "" {
		t.Fatal("spiretest: StartNodeAgent needs Options.PSAT: the server admits no k8s_psat agent")
	}
	dir := filepath.Join(e.Dir, name)
	a := &Agent{ID: id, WorkloadSocket: filepath.Join(dir, "workload", "agent.sock"), AdminSocket: filepath.Join(dir, "admin", "admin.sock")}
	for _, d := range []string{"workload", "admin", "data"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	tokenPath := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenPath, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	e.startAgent(t, name, filepath.Join(name, "data"), a.WorkloadSocket, a.AdminSocket, fmt.Sprintf(`NodeAttestor "k8s_psat" {
    plugin_data {
      cluster = %q
      token_path = %q
    }
  }`, e.psatCluster, tokenPath), "")
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	e.waitHealthy(ctx, t, "spire-agent", a.WorkloadSocket)
	e.CreateEntry(t, e.Delegate, id, e.delegateSelector())
	e.waitDelegate(ctx, t, a.WorkloadSocket)
	return a
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

func (e *Env) startServer(t testing.TB, svidTTL time.Duration, psat *PSAT) {
	psatPlugin := ""
	if psat != nil {
		e.psatCluster = psat.Cluster
		psatPlugin = fmt.Sprintf(`
  NodeAttestor "k8s_psat" {
    plugin_data {
      clusters = {
        %q = {
          service_account_allow_list = [%q]
          kube_config_file = %q
        }
      }
    }
  }`, psat.Cluster, psat.ServiceAccount, psat.Kubeconfig)
	}
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
  }%s
}
`, e.port, e.ServerSocket, e.TrustDomain.Name(), filepath.Join(e.Dir, "server-data"), svidTTL.String(),
		filepath.Join(e.Dir, "server-data", "datastore.sqlite3"), psatPlugin)
	e.run(t, "spire-server", "spire-server", conf)
}

// startAgent runs an agent called name with its node attestor's plugin block and extra agent
// settings, its data under <Dir>/<data> and its sockets at workload and admin.
func (e *Env) startAgent(t testing.TB, name, data, workload, admin, attestor, extra string) {
	conf := fmt.Sprintf(`agent {
  data_dir = %q
  log_level = "INFO"
  server_address = "127.0.0.1"
  server_port = "%d"
  socket_path = %q
  admin_socket_path = %q
  trust_domain = %q
  insecure_bootstrap = true
  %s
  authorized_delegates = [%q]
}
plugins {
  %s
  KeyManager "memory" {
    plugin_data {}
  }
  WorkloadAttestor "unix" {
    plugin_data {}
  }
}
`, filepath.Join(e.Dir, data), e.port, workload, admin, e.TrustDomain.Name(), extra, e.Delegate.String(), attestor)
	e.run(t, "spire-agent", name, conf)
}

// run starts binary as name with conf until the test ends; its log is <Dir>/<name>.log, printed
// when the test fails.
func (e *Env) run(t testing.TB, binary, name, conf string) {
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
	cmd := exec.Command(filepath.Join(e.bin, binary), "run", "-config", confPath)
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
func (e *Env) waitHealthy(ctx context.Context, t testing.TB, name, socket string) {
	t.Helper()
	var last []byte
	for {
		out, err := exec.CommandContext(ctx, filepath.Join(e.bin, name), "healthcheck", "-socketPath", socket).CombinedOutput()
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
func (e *Env) joinToken(ctx context.Context, t testing.TB) string {
	t.Helper()
	out, err := exec.CommandContext(ctx, filepath.Join(e.bin, "spire-server"), "token", "generate",
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

// waitDelegate waits until the agent on workload hands this process its delegate SVID: from
// then on, that agent's Delegated Identity API accepts this process.
func (e *Env) waitDelegate(ctx context.Context, t testing.TB, workload string) {
	t.Helper()
	for {
		svid, err := workloadapi.FetchX509SVID(ctx, workloadapi.WithAddr("unix://"+workload))
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

// DelegatedClient is a client of the Delegated Identity API on the agent's admin socket, as the
// node agent dials it (this process is the authorized delegate); it is closed when the test ends.
func DelegatedClient(t testing.TB, admin string) delegatedv1.DelegatedIdentityClient {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+admin, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return delegatedv1.NewDelegatedIdentityClient(conn)
}

// X509Bundle is the X.509 roots of trust domain td in the first answer of the Delegated Identity
// API's bundle stream; the test fails when that answer holds none.
func X509Bundle(ctx context.Context, t testing.TB, client delegatedv1.DelegatedIdentityClient, td spiffeid.TrustDomain) []*x509.Certificate {
	t.Helper()
	bundles, err := client.SubscribeToX509Bundles(ctx, &delegatedv1.SubscribeToX509BundlesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := bundles.Recv()
	if err != nil {
		t.Fatalf("bundles: %v", err)
	}
	ders := got.CaCertificates[td.IDString()]
	if len(ders) == 0 {
		t.Fatalf("no bundle for %s in %v", td.IDString(), slices.Collect(maps.Keys(got.CaCertificates)))
	}
	cas, err := x509.ParseCertificates(ders)
	if err != nil {
		t.Fatal(err)
	}
	return cas
}

// WaitX509SVID subscribes, through the Delegated Identity API, to the X.509 SVIDs of selectors
// and waits until an answer holds the SVID of want, which it returns; it fails the test when the
// stream ends first (ctx's deadline). A node agent syncs its entries every 5 s: its first
// answers may not hold an entry just made.
func WaitX509SVID(ctx context.Context, t testing.TB, client delegatedv1.DelegatedIdentityClient, want spiffeid.ID, selectors []*types.Selector) *delegatedv1.X509SVIDWithKey {
	t.Helper()
	stream, err := client.SubscribeToX509SVIDs(ctx, &delegatedv1.SubscribeToX509SVIDsRequest{Selectors: selectors})
	if err != nil {
		t.Fatal(err)
	}
	for {
		resp, err := stream.Recv()
		if err != nil {
			t.Fatalf("no SVID for %s from the Delegated Identity API: %v", want, err)
		}
		for _, s := range resp.X509Svids {
			if s.X509Svid.Id.Path == want.Path() {
				return s
			}
		}
	}
}
