// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package spireregistrar

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	delegatedv1 "github.com/spiffe/spire-api-sdk/proto/spire/api/agent/delegatedidentity/v1"
	"github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aether-mesh/aether-operator/internal/spiretest"
	"github.com/aether-mesh/aether-operator/internal/testenv"
	"github.com/aether-mesh/aether-operator/internal/workloadidentity"
)

// TestNodeHoldsOnlyItsPodsIdentities: two real SPIRE agents, each attested by k8s_psat as the
// agent of its own node (a ServiceAccount token bound to a pod on that node, which the real
// SPIRE server checks by TokenReview against the real API server, then reads the pod's node and
// its UID), and the registrar running in a manager. Through the Delegated Identity API, as the
// node agent calls it:
//   - node A, which runs a pod of identity X, obtains X's SVID; node B, which runs none (but a
//     pod of Y, whose SVID it obtains after X's entries were written), cannot: SPIRE answers
//     "no identity issued";
//   - a pod of X bound to B gives B X; A's last pod of X going takes X from A.
func TestNodeHoldsOnlyItsPodsIdentities(t *testing.T) {
	ctx := testContext(t)
	// The SPIRE agents' namespace and ServiceAccount, the only one k8s_psat admits.
	agentsNS, err := env.Namespace(ctx, "spire")
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: agentsNS, Name: "spire-agent"}}); err != nil {
		t.Fatal(err)
	}
	r := newRigWith(t, DefaultResync, "", spiretest.Options{TrustDomain: "aether.internal",
		PSAT: &spiretest.PSAT{Cluster: "aether", Kubeconfig: env.Kubeconfig, ServiceAccount: agentsNS + ":spire-agent"}})
	nodeA, nodeB := node(t), node(t)
	agentA := r.nodeAgent(t, agentsNS, "agent-a", nodeA)
	agentB := r.nodeAgent(t, agentsNS, "agent-b", nodeB)

	_, x := r.service(t, "x", nodeA)
	_, y := r.service(t, "y", nodeB)
	xSelectors, ySelectors := workloadidentity.PodSelectors(r.ns, "x"), workloadidentity.PodSelectors(r.ns, "y")
	onA := r.meshPod(t, "x-1", "x", nodeA)
	waitSVID(t, r.spire, agentA.AdminSocket, x.SPIFFEID, xSelectors)
	r.meshPod(t, "y-1", "y", nodeB)
	waitSVID(t, r.spire, agentB.AdminSocket, y.SPIFFEID, ySelectors)

	// B's agent has synced since X's entries were written (it holds Y, registered after A held
	// X): what it does not hold now, it was not given.
	if err := fetchJWT(agentA, x.SPIFFEID, xSelectors); err != nil {
		t.Fatalf("node A runs a pod of %s but its agent does not hand it out: %v", x.SPIFFEID, err)
	}
	err = fetchJWT(agentB, x.SPIFFEID, xSelectors)
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("node B runs no pod of %s, yet its agent's Delegated Identity API answered %v, want PermissionDenied (no identity issued)", x.SPIFFEID, err)
	}
	t.Logf("as expected, node B's agent refuses %s: %v", x.SPIFFEID, err)
	r.waitOnly(t, x.SPIFFEID, x)

	// X's pods move from A to B.
	r.meshPod(t, "x-2", "x", nodeB)
	waitSVID(t, r.spire, agentB.AdminSocket, x.SPIFFEID, xSelectors)
	deletePod(t, onA)
	testenv.Eventually(t, "node A's agent no longer hands out "+x.SPIFFEID.String(), func() error {
		if err := fetchJWT(agentA, x.SPIFFEID, xSelectors); status.Code(err) != codes.PermissionDenied {
			return fmt.Errorf("it answers %v", err)
		}
		return nil
	})
	r.waitOnly(t, x.SPIFFEID, r.entryOn(t, x.SPIFFEID, "x", nodeB))
}

// nodeAgent runs a SPIRE agent as node's: k8s_psat with a token of ServiceAccount
// <agentsNS>/spire-agent bound to a pod on node, as the kubelet projects it into the SPIRE
// agent's pod (audience spire-server).
func (r *rig) nodeAgent(t *testing.T, agentsNS, name string, node *corev1.Node) *spiretest.Agent {
	t.Helper()
	ctx := testContext(t)
	p := pod(t, agentsNS, name, "spire-agent", node, nil)
	req := &authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{
		Audiences: []string{"spire-server"}, ExpirationSeconds: new(int64(3600)),
		BoundObjectRef: &authnv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: p.Name, UID: p.UID},
	}}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: agentsNS, Name: "spire-agent"}}
	if err := env.Client.SubResource("token").Create(ctx, sa, req); err != nil {
		t.Fatalf("a token for the SPIRE agent of %s: %v", node.Name, err)
	}
	return r.spire.StartNodeAgent(t, name, req.Status.Token, r.agentOf(t, node))
}

// fetchJWT asks agent's Delegated Identity API, as the node agent would, for a JWT-SVID of
// selectors: nil when it issues one for want, its error otherwise (PermissionDenied: the agent
// holds no entry for selectors).
func fetchJWT(agent *spiretest.Agent, want spiffeid.ID, selectors []workloadidentity.Selector) error {
	conn, err := grpc.NewClient("unix://"+agent.AdminSocket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := &delegatedv1.FetchJWTSVIDsRequest{Audience: []string{"test"}}
	for _, s := range selectors {
		req.Selectors = append(req.Selectors, &types.Selector{Type: s.Type, Value: s.Value})
	}
	resp, err := delegatedv1.NewDelegatedIdentityClient(conn).FetchJWTSVIDs(ctx, req)
	if err != nil {
		return err
	}
	for _, svid := range resp.Svids {
		if svid.Id.GetPath() == want.Path() {
			return nil
		}
	}
	return fmt.Errorf("JWT-SVIDs %v, none for %s", resp.Svids, want)
}
