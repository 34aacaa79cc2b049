// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package v1alpha1_test

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/portspec"
	"github.com/aether-mesh/aether-operator/internal/testenv"
)

// TestAPIAgreesWithPortspec pins the constants the API and the parser must share: if one moves
// without the other, the API server and the parser would disagree about what is valid.
func TestAPIAgreesWithPortspec(t *testing.T) {
	if meshv1alpha1.MaxPorts != portspec.MaxPorts {
		t.Errorf("MaxPorts: API %d, portspec %d", meshv1alpha1.MaxPorts, portspec.MaxPorts)
	}
	apiReserved := []int32{meshv1alpha1.MeshHTTPPort, meshv1alpha1.MeshTCPPort, meshv1alpha1.ProxyCapturePort, meshv1alpha1.ProxyInboundPort}
	if got := slices.Sorted(maps.Keys(portspec.Reserved)); !slices.Equal(got, slices.Sorted(slices.Values(apiReserved))) {
		t.Errorf("reserved ports: API %v, portspec %v", apiReserved, got)
	}
	for api, parsed := range map[meshv1alpha1.Protocol]portspec.Protocol{
		meshv1alpha1.ProtocolHTTP: portspec.HTTP, meshv1alpha1.ProtocolHTTP2: portspec.HTTP2, meshv1alpha1.ProtocolTCP: portspec.TCP,
	} {
		if string(api) != string(parsed) {
			t.Errorf("protocol spelling: API %q, portspec %q", api, parsed)
		}
	}
	if string(meshv1alpha1.AppProtocolGRPC) != string(portspec.GRPC) {
		t.Errorf("app protocol spelling: API %q, portspec %q", meshv1alpha1.AppProtocolGRPC, portspec.GRPC)
	}

	crd, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "crd", "bases", "mesh.aether.io_meshendpoints.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for port := range portspec.Reserved {
		if !strings.Contains(string(crd), "!(self in [18001, 18008, 18081, 18082])") {
			t.Errorf("the MeshEndpoint CRD does not refuse reserved port %d", port)
		}
	}
}

// TestSampleEndpointsMatchTheirDeployment parses the sample Deployment's pod annotations with
// portspec and checks the sample MeshEndpoints carry exactly those ports: the samples show what
// the agent writes, so they must agree with the one parser.
func TestSampleEndpointsMatchTheirDeployment(t *testing.T) {
	dir := filepath.Join(testenv.RepoRoot(), "config", "samples")
	raw, err := os.ReadFile(filepath.Join(dir, "payments_deployment.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var deploy appsv1.Deployment
	if err := yaml.Unmarshal(raw, &deploy); err != nil {
		t.Fatal(err)
	}
	spec, err := portspec.Parse(deploy.Spec.Template.Annotations)
	if err != nil {
		t.Fatalf("the sample Deployment's annotations do not parse: %v", err)
	}

	raw, err = os.ReadFile(filepath.Join(dir, "payments_meshendpoints.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(string(raw), "\n---\n")
	endpoints := 0
	for _, doc := range docs {
		var ep meshv1alpha1.MeshEndpoint
		if err := yaml.UnmarshalStrict([]byte(doc), &ep); err != nil {
			t.Fatal(err)
		}
		if ep.Kind != "MeshEndpoint" {
			continue
		}
		endpoints++
		var got []portspec.Port
		for _, p := range ep.Spec.Ports {
			got = append(got, portspec.Port{Number: p.Port, Protocol: portspec.Protocol(p.Protocol), AppProtocol: portspec.AppProtocol(p.AppProtocol)})
		}
		if ep.Spec.PrimaryPort != spec.Primary || !slices.Equal(got, spec.Ports) {
			t.Errorf("%s: primary %d ports %v; the Deployment's annotations say primary %d ports %v",
				ep.Name, ep.Spec.PrimaryPort, got, spec.Primary, spec.Ports)
		}
		if ep.Spec.HealthCheck.Path != spec.HealthCheck.Path || !maps.Equal(ep.Spec.Metadata, spec.Metadata) {
			t.Errorf("%s: health path %q metadata %v; annotations say %q %v",
				ep.Name, ep.Spec.HealthCheck.Path, ep.Spec.Metadata, spec.HealthCheck.Path, spec.Metadata)
		}
		if ep.Spec.ServiceName != deploy.Spec.Template.Spec.ServiceAccountName {
			t.Errorf("%s: serviceName %q, the Deployment's ServiceAccount is %q", ep.Name, ep.Spec.ServiceName, deploy.Spec.Template.Spec.ServiceAccountName)
		}
	}
	if endpoints != int(*deploy.Spec.Replicas) {
		t.Errorf("%d sample endpoints for %d replicas", endpoints, *deploy.Spec.Replicas)
	}
}
