// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package spireregistrar

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"os"
	"path"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	entryv1 "github.com/spiffe/spire-api-sdk/proto/spire/api/server/entry/v1"
	"github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/registration"
	"github.com/aether-mesh/aether-operator/internal/spiretest"
	"github.com/aether-mesh/aether-operator/internal/testenv"
	"github.com/aether-mesh/aether-operator/internal/workloadidentity"
)

// env is this package's real kube-apiserver and etcd. Each test runs its own real SPIRE
// (internal/spiretest) and its own manager, whose registrar sees only the test's namespace.
var env *testenv.Env

func TestMain(m *testing.M) {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.UseDevMode(false)))
	testenv.Run(m, &env)
}

// delegateNamespace is the node agent's namespace in the tests' configuration.
const delegateNamespace = "aether-operator-system"

// rig is one test's SPIRE, namespace and manager running the registrar.
type rig struct {
	spire *spiretest.Env
	ns    string
	cfg   Config
	// manager is the registrar the manager runs; its reads are the manager's cache.
	manager *Registrar
	// api is the test's own client of the SPIRE server API (not the registrar's).
	api entryv1.EntryClient
}

// newRig starts SPIRE for trust domain aether.internal, a namespace, and a manager running the
// registrar over that namespace with resync period resync, connected to socket (SPIRE's when
// empty).
func newRig(t *testing.T, resync time.Duration, socket string) *rig {
	t.Helper()
	return newRigWith(t, resync, socket, spiretest.Options{TrustDomain: "aether.internal"})
}

// newRigWith is newRig with SPIRE started with opts.
func newRigWith(t *testing.T, resync time.Duration, socket string, opts spiretest.Options) *rig {
	t.Helper()
	r := &rig{spire: spiretest.Start(t, opts)}
	r.api = entryv1.NewEntryClient(r.spire.ServerConn(t))
	r.cfg = Config{TrustDomain: r.spire.TrustDomain, NodeSelectors: []workloadidentity.Selector{{Type: "k8s_psat", Value: "cluster:aether"}},
		DelegateNamespace: delegateNamespace, DelegateServiceAccount: DefaultDelegateServiceAccount, NodeAgentPath: DefaultNodeAgentPath}
	ns, err := env.Namespace(testContext(t), "registrar")
	if err != nil {
		t.Fatal(err)
	}
	r.ns = ns
	r.manager = r.startManager(t, resync, cmp.Or(socket, r.spire.ServerSocket))
	return r
}

// startManager runs a manager with the registrar-only mode's cache (MeshServices trimmed to
// their identity), limited to the rig's namespace, until the test ends.
func (r *rig) startManager(t *testing.T, resync time.Duration, socket string) *Registrar {
	t.Helper()
	cacheOptions := CacheOptions()
	cacheOptions.DefaultNamespaces = map[string]cache.Config{r.ns: {}}
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:                 env.Scheme,
		Cache:                  cacheOptions,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := Dial(socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	reg := &Registrar{Reader: mgr.GetClient(), Conn: conn, Config: r.cfg, Resync: resync, controllerName: controllerNameOf(t)}
	if err := reg.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	stop, err := testenv.StartManager(mgr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return reg
}

// controllerNameOf is a controller name unique to the test (controller-runtime refuses two of one
// name in a process); metrics name it.
func controllerNameOf(t *testing.T) string {
	return "spire-registrar-" + strings.ToLower(strings.TrimPrefix(t.Name(), "Test"))
}

// counted returns a registrar like the manager's, on a connection of its own whose calls are
// counted by method.
func (r *rig) counted(t *testing.T) (*Registrar, *calls) {
	t.Helper()
	c := &calls{n: map[string]int{}}
	conn, err := Dial(r.spire.ServerSocket, grpc.WithUnaryInterceptor(c.intercept))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return &Registrar{Reader: r.manager.Reader, Conn: conn, Config: r.cfg}, c
}

// calls counts the SPIRE API calls made on a connection, by method name.
type calls struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *calls) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	c.mu.Lock()
	c.n[path.Base(method)]++
	c.mu.Unlock()
	return invoker(ctx, method, req, reply, cc, opts...)
}

func (c *calls) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.n)
}

// entries lists every entry of the rig's SPIRE, whoever made it.
func (r *rig) entries(t *testing.T) []Entry {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	all, err := spire{entries: r.api}.list(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	return all
}

// waitEntry polls until SPIRE holds an entry with want's ID that equals want.
func (r *rig) waitEntry(t *testing.T, want Entry) {
	t.Helper()
	testenv.Eventually(t, fmt.Sprintf("entry %s for %s", want.ID, want.SPIFFEID), func() error {
		for _, e := range r.entries(t) {
			if e.ID == want.ID {
				if !e.equal(want) {
					return fmt.Errorf("entry %s is %+v, want %+v", e.ID, e, want)
				}
				return nil
			}
		}
		return fmt.Errorf("no entry %s", want.ID)
	})
}

// waitGone polls until SPIRE holds no entry of ID entryID.
func (r *rig) waitGone(t *testing.T, entryID string) {
	t.Helper()
	testenv.Eventually(t, "entry "+entryID+" deleted", func() error {
		for _, e := range r.entries(t) {
			if e.ID == entryID {
				return fmt.Errorf("entry %s (%s) still exists", e.ID, e.SPIFFEID)
			}
		}
		return nil
	})
}

// handMade creates an entry as a user would (SPIRE chooses its ID) and returns it as SPIRE
// stores it.
func (r *rig) handMade(t *testing.T, e Entry) Entry {
	t.Helper()
	e.ID = ""
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := r.api.BatchCreateEntry(ctx, &entryv1.BatchCreateEntryRequest{Entries: []*types.Entry{toAPI(e)}})
	if err != nil {
		t.Fatal(err)
	}
	if res := resp.Results[0]; codes.Code(res.Status.Code) != codes.OK {
		t.Fatalf("creating %s by hand: %s", e.SPIFFEID, res.Status.Message)
	}
	return fromAPI(resp.Results[0].Entry)
}

// service creates MeshService name in the rig's namespace with identity
// spiffe://aether.internal/ns/<ns>/sa/<name>, as the MeshService controller writes it, and the
// ServiceAccount of that name, and returns the registrar's entry for it on node (whose pods of
// it the test makes).
func (r *rig) service(t *testing.T, name string, node *corev1.Node) (*meshv1alpha1.MeshService, Entry) {
	t.Helper()
	ctx := testContext(t)
	ms := &meshv1alpha1.MeshService{ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: name}}
	if err := env.Client.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: name}}); err != nil {
		t.Fatal(err)
	}
	id, err := workloadidentity.ServiceAccountID(r.spire.TrustDomain, r.ns, name)
	if err != nil {
		t.Fatal(err)
	}
	ms.Status.Identity = id.String()
	if err := env.Client.Status().Update(ctx, ms); err != nil {
		t.Fatalf("setting the identity of MeshService %s: %v", name, err)
	}
	return ms, r.entryOn(t, id, name, node)
}

// entryOn is the registrar's entry of identity id (ServiceAccount sa of the rig's namespace) on
// node.
func (r *rig) entryOn(t *testing.T, id spiffeid.ID, sa string, node *corev1.Node) Entry {
	t.Helper()
	agent := r.agentOf(t, node)
	return Entry{ID: NodeEntryID(id, agent), SPIFFEID: id, Parent: agent, Selectors: workloadidentity.PodSelectors(r.ns, sa)}
}

// agentOf is node's SPIRE agent ID, as k8s_psat makes it: of the node's UID.
func (r *rig) agentOf(t *testing.T, node *corev1.Node) spiffeid.ID {
	t.Helper()
	agent, err := r.cfg.NodeAgent(Node{Name: node.Name, UID: string(node.UID)})
	if err != nil {
		t.Fatal(err)
	}
	return agent
}

// node creates a node (a Node object; no kubelet) and removes it when the test ends.
func node(t *testing.T) *corev1.Node {
	t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{GenerateName: "node-"}}
	if err := env.Client.Create(testContext(t), n); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), n) })
	return n
}

// pod creates a mesh pod (labelled aether.io/managed=true) of ServiceAccount sa in namespace ns,
// bound to node as the scheduler binds it (spec.nodeName; none when node is nil).
func pod(t *testing.T, ns, name, sa string, node *corev1.Node, labels map[string]string) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: corev1.PodSpec{ServiceAccountName: sa, AutomountServiceAccountToken: new(false),
			Containers: []corev1.Container{{Name: "app", Image: "app"}}},
	}
	if node != nil {
		p.Spec.NodeName = node.Name
	}
	if err := env.Client.Create(testContext(t), p); err != nil {
		t.Fatal(err)
	}
	return p
}

// meshPod is pod in the rig's namespace, labelled as the mesh's.
func (r *rig) meshPod(t *testing.T, name, sa string, node *corev1.Node) *corev1.Pod {
	t.Helper()
	return pod(t, r.ns, name, sa, node, map[string]string{registration.LabelManaged: registration.ManagedValue})
}

func deletePod(t *testing.T, p *corev1.Pod) {
	t.Helper()
	if err := env.Client.Delete(testContext(t), p, client.GracePeriodSeconds(0)); client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
}

func (r *rig) deleteService(t *testing.T, ms *meshv1alpha1.MeshService) {
	t.Helper()
	if err := env.Client.Delete(testContext(t), ms); client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// reconciles reads how many reconciles the test's registrar has finished.
func reconciles(t *testing.T) float64 {
	t.Helper()
	n, err := testenv.Counter("controller_runtime_reconcile_total", "controller", controllerNameOf(t))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// waitReconciles polls until the test's registrar has finished n more reconciles than it had.
func waitReconciles(t *testing.T, n float64) {
	t.Helper()
	from := reconciles(t)
	testenv.Eventually(t, fmt.Sprintf("%v more reconciles", n), func() error {
		if got := reconciles(t) - from; got < n {
			return fmt.Errorf("%v reconciles so far", got)
		}
		return nil
	})
}
