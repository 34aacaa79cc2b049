// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package v1alpha1_test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/testenv"
)

// meshWrittenResources are the kinds only the mesh writes: no person needs to write them.
var meshWrittenResources = []string{"meshendpoints", "meshservices"}

// meshWriters are the roles of the components that write them.
var meshWriters = []string{"manager-role", "agent-role"}

var writeVerbs = []string{"create", "update", "patch", "delete", "deletecollection", "*"}

// meshWrites lists the rules of role that let someone write a mesh-written kind.
func meshWrites(rules []rbacv1.PolicyRule) []string {
	var found []string
	for _, r := range rules {
		if !slices.Contains(r.APIGroups, meshv1alpha1.GroupVersion.Group) && !slices.Contains(r.APIGroups, "*") {
			continue
		}
		for _, res := range r.Resources {
			base, _, _ := strings.Cut(res, "/")
			if base != "*" && !slices.Contains(meshWrittenResources, base) {
				continue
			}
			for _, v := range r.Verbs {
				if slices.Contains(writeVerbs, v) {
					found = append(found, res+":"+v)
				}
			}
		}
	}
	return found
}

// configRoles reads every ClusterRole and Role in the YAML files under dir.
func configRoles(t *testing.T, dir string) map[string][]rbacv1.PolicyRule {
	t.Helper()
	roles := map[string][]rbacv1.PolicyRule{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yaml") {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for doc := range bytes.SplitSeq(data, []byte("\n---")) {
			var role struct {
				Kind     string              `json:"kind"`
				Metadata metav1.ObjectMeta   `json:"metadata"`
				Rules    []rbacv1.PolicyRule `json:"rules"`
			}
			if err := yaml.Unmarshal(doc, &role); err != nil {
				continue // not every YAML file under config/ is one object (kustomize patches)
			}
			if role.Kind == "ClusterRole" || role.Kind == "Role" {
				roles[path+":"+role.Metadata.Name] = role.Rules
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return roles
}

// TestNoRoleLetsPeopleWriteMeshWrittenKinds: only the manager's and the agent's roles may write
// MeshEndpoints or MeshServices. A tenant bound to kubebuilder's old editor role forged a
// MeshEndpoint that created a MeshService and Service with no pod behind them.
func TestNoRoleLetsPeopleWriteMeshWrittenKinds(t *testing.T) {
	roles := configRoles(t, filepath.Join(testenv.RepoRoot(), "config"))
	if len(roles) < 4 {
		t.Fatalf("read %d roles from config/; the walk is broken", len(roles))
	}
	writers := 0
	for name, rules := range roles {
		writes := meshWrites(rules)
		isWriter := slices.ContainsFunc(meshWriters, func(w string) bool { return strings.HasSuffix(name, ":"+w) })
		switch {
		case isWriter && len(writes) > 0:
			writers++
		case len(writes) > 0:
			t.Errorf("%s grants %v on a kind only the mesh writes: ship a viewer role instead", name, writes)
		}
	}
	if writers != len(meshWriters) {
		t.Errorf("found %d of the mesh's own writer roles (%v) granting writes; the check would miss them", writers, meshWriters)
	}

	// Negative control: the rule kubebuilder's editor role carried, and wildcards, are flagged.
	for _, rule := range []rbacv1.PolicyRule{
		{APIGroups: []string{"mesh.aether.io"}, Resources: []string{"meshendpoints"}, Verbs: []string{"create", "get"}},
		{APIGroups: []string{"mesh.aether.io"}, Resources: []string{"meshservices/status"}, Verbs: []string{"patch"}},
		{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}},
	} {
		if len(meshWrites([]rbacv1.PolicyRule{rule})) == 0 {
			t.Errorf("negative control: %+v grants a write and was not flagged", rule)
		}
	}
	if got := meshWrites([]rbacv1.PolicyRule{{APIGroups: []string{"mesh.aether.io"}, Resources: meshWrittenResources, Verbs: []string{"get", "list", "watch"}}}); len(got) != 0 {
		t.Errorf("read verbs were flagged as writes: %v", got)
	}
}

// TestViewerRolesAreReadOnlyAndAggregateIntoView applies the shipped viewer roles to the real API
// server, binds a namespace user to them, and checks what that user can do; the roles carry the
// labels that aggregate them into view, edit and admin (the aggregation itself is done by
// kube-controller-manager, which the cluster tier runs: its smoke test checks it there).
func TestViewerRolesAreReadOnlyAndAggregateIntoView(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t, ctx)
	for _, kind := range []string{"meshendpoint", "meshservice"} {
		data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "rbac", kind+"_viewer_role.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		role := &rbacv1.ClusterRole{}
		if err := yaml.Unmarshal(data, role); err != nil {
			t.Fatal(err)
		}
		for _, agg := range []string{"view", "edit", "admin"} {
			if role.Labels["rbac.authorization.k8s.io/aggregate-to-"+agg] != "true" {
				t.Errorf("%s does not aggregate into %s", role.Name, agg)
			}
		}
		if err := env.Client.Create(ctx, role); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		binding := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: role.Name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: "alice"}},
		}
		if err := env.Client.Create(ctx, binding); err != nil {
			t.Fatal(err)
		}
	}
	alice, err := env.ClientAs("alice", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "alice can list MeshServices and MeshEndpoints", func() error {
		if err := alice.List(ctx, &meshv1alpha1.MeshServiceList{}, client.InNamespace(ns)); err != nil {
			return err
		}
		return alice.List(ctx, &meshv1alpha1.MeshEndpointList{}, client.InNamespace(ns))
	})
	if err := alice.Create(ctx, validEndpoint(ns, "forged")); !apierrors.IsForbidden(err) {
		t.Errorf("alice created a MeshEndpoint with the viewer role: %v", err)
	}
	if err := alice.Create(ctx, &meshv1alpha1.MeshService{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "forged"}}); !apierrors.IsForbidden(err) {
		t.Errorf("alice created a MeshService with the viewer role: %v", err)
	}
}
