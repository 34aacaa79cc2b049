// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package v1alpha1_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/portspec"
	"github.com/aether-mesh/aether-operator/internal/resolve"
	"github.com/aether-mesh/aether-operator/internal/testenv"
	"github.com/aether-mesh/aether-operator/internal/workloadidentity"
)

// TestAPIAgreesWithPortspec pins the constants the API and the parser must share: if one moves
// without the other, the API server and the parser would disagree about what is valid.
func TestAPIAgreesWithPortspec(t *testing.T) {
	if meshv1alpha1.MaxPorts != portspec.MaxPorts {
		t.Errorf("MaxPorts: API %d, portspec %d", meshv1alpha1.MaxPorts, portspec.MaxPorts)
	}
	apiReserved := []int32{meshv1alpha1.MeshHTTPPort, meshv1alpha1.MeshTCPPort, meshv1alpha1.ProxyCapturePort, meshv1alpha1.ProxyInboundPort, meshv1alpha1.MeshDNSPort}
	reserved := slices.Sorted(maps.Keys(portspec.Reserved))
	if !slices.Equal(reserved, slices.Sorted(slices.Values(apiReserved))) {
		t.Errorf("reserved ports: API %v, portspec %v", apiReserved, reserved)
	}

	// The CRD's rule lists exactly the reserved ports: an extra one anywhere would refuse a port
	// the parser admits (the API server check below only probes the reserved ports' neighbours).
	if got := celReservedPorts(t); !slices.Equal(got, reserved) {
		t.Errorf("the MeshEndpoint CRD's rule refuses ports %v; portspec.Reserved is %v", got, reserved)
	}

	// The real API server refuses an endpoint declaring each reserved port, with a message that
	// names it, and accepts one declaring each neighbour that is not reserved itself (the
	// control: the rule refuses those ports, not a range).
	ctx := testContext(t)
	ns := namespace(t, ctx)
	for _, port := range reserved {
		expectRefusal(t, createWithPort(ctx, ns, port), []string{"spec.ports[1].port", "the mesh's own", strconv.Itoa(int(port))})
		for _, neighbour := range []int32{port - 1, port + 1} {
			if _, isReserved := portspec.Reserved[neighbour]; !isReserved {
				if err := createWithPort(ctx, ns, neighbour); err != nil {
					t.Errorf("port %d (next to reserved %d) refused: %v", neighbour, port, err)
				}
			}
		}
	}
}

// createWithPort creates a MeshEndpoint declaring HTTP 8080 (its primary) and TCP port.
func createWithPort(ctx context.Context, ns string, port int32) error {
	ep := validEndpoint(ns, fmt.Sprintf("port-%d", port))
	setPorts(&ep.Spec, 8080, "HTTP", int(port), "TCP")
	return env.Client.Create(ctx, ep)
}

// reservedRule is the CEL rule on a MeshEndpoint port that refuses the mesh's own ports.
var reservedRule = regexp.MustCompile(`rule: '!\(self in \[([0-9, ]*)\]\)'`)

// celReservedPorts reads the ports listed in the MeshEndpoint CRD's reserved-port rule, sorted.
func celReservedPorts(t *testing.T) []int32 {
	t.Helper()
	crd, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "crd", "bases", "mesh.aether.io_meshendpoints.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	rules := reservedRule.FindAllSubmatch(crd, -1)
	if len(rules) != 1 {
		t.Fatalf("the MeshEndpoint CRD has %d rules matching %s, want 1", len(rules), reservedRule)
	}
	var ports []int32
	for field := range strings.SplitSeq(string(rules[0][1]), ",") {
		port, err := strconv.ParseInt(strings.TrimSpace(field), 10, 32)
		if err != nil {
			t.Fatalf("the reserved-port rule lists %q: %v", field, err)
		}
		ports = append(ports, int32(port))
	}
	return slices.Sorted(slices.Values(ports))
}

// TestAPIAgreesWithResolve pins the dial surface's words the API and the resolution rule share:
// every outcome and x-aether-error value a surface row can carry is in the CRD's enum, spelt the
// same, and the API has nothing the rule never writes. BadRequest and bad-authority (the answer
// to a malformed authority) and not-mesh-name (the proxy port's answer to a foreign host) are no
// row of a surface.
func TestAPIAgreesWithResolve(t *testing.T) {
	service := crdSchema(t, "mesh.aether.io_meshservices.yaml")
	outcomes := []string{string(meshv1alpha1.DialReaches), string(meshv1alpha1.DialMisdirected), string(meshv1alpha1.DialRefused),
		string(meshv1alpha1.DialHostDecides)}
	wantOutcomes := []string{string(resolve.Reaches), string(resolve.Misdirected), string(resolve.Refused), string(resolve.HostDecides)}
	codes := []string{string(meshv1alpha1.DialErrorNoHTTPPort), string(meshv1alpha1.DialErrorPortNotDeclared), string(meshv1alpha1.DialErrorPortNotHTTP)}
	var wantErrors []string
	for _, e := range resolve.MeshErrors() {
		if e != resolve.BadAuthority && e != resolve.NotAMeshName {
			wantErrors = append(wantErrors, string(e))
		}
	}
	for _, c := range []struct {
		what      string
		api, want []string
		path      string
	}{
		{"dial outcomes", outcomes, wantOutcomes, "status.dialSurface.[].outcome"},
		{"x-aether-error values", codes, wantErrors, "status.dialSurface.[].error"},
	} {
		slices.Sort(c.api)
		slices.Sort(c.want)
		if crd := enum(t, service, c.path); !slices.Equal(c.api, c.want) || !slices.Equal(crd, c.want) {
			t.Errorf("%s: API constants %v, CRD enum %v, resolve %v", c.what, c.api, crd, c.want)
		}
	}

	// What the rule writes is in those enums: every row of every kind of surface.
	for _, set := range []portspec.PortSet{
		portspec.NewPortSet(8080, []portspec.Port{{Port: 8080, Protocol: meshv1alpha1.ProtocolHTTP}, {Port: 9000, Protocol: meshv1alpha1.ProtocolTCP}}),
		portspec.NewPortSet(9000, []portspec.Port{{Port: 9000, Protocol: meshv1alpha1.ProtocolTCP}}),
		portspec.NewPortSet(80, []portspec.Port{{Port: 80, Protocol: meshv1alpha1.ProtocolHTTP2}, {Port: 443, Protocol: meshv1alpha1.ProtocolTCP}}),
		{},
	} {
		for _, issuer := range workloadidentity.Issuers { // without one, raw TCP is Refused: no outcome of its own
			for _, d := range resolve.DialSurface(set, issuer) {
				if !slices.Contains(wantOutcomes, string(d.Outcome)) || (d.Error != "" && !slices.Contains(wantErrors, string(d.Error))) {
					t.Errorf("%v, issuer %s: row %s has outcome %s, error %q: not in the API's enums", set, issuer, d.Address, d.Outcome, d.Error)
				}
			}
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
		got := ep.Spec.Ports
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

// crdSchema reads the openAPIV3Schema of the generated CRD in config/crd/bases/<file>.
func crdSchema(t *testing.T, file string) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "crd", "bases", file))
	if err != nil {
		t.Fatal(err)
	}
	var crd struct {
		Spec struct {
			Versions []struct {
				Schema struct {
					OpenAPIV3Schema map[string]any `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(raw, &crd); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	if len(crd.Spec.Versions) != 1 {
		t.Fatalf("%s: %d versions, want 1", file, len(crd.Spec.Versions))
	}
	return crd.Spec.Versions[0].Schema.OpenAPIV3Schema
}

// schemaAt returns the schema at path, a dotted list of property names where "[]" steps into an
// array's items: "status.dialSurface.[].reason".
func schemaAt(t *testing.T, schema map[string]any, path string) map[string]any {
	t.Helper()
	node := schema
	for step := range strings.SplitSeq(path, ".") {
		var next any
		if step == "[]" {
			next = node["items"]
		} else if props, ok := node["properties"].(map[string]any); ok {
			next = props[step]
		}
		if node, _ = next.(map[string]any); node == nil {
			t.Fatalf("the CRD schema has no %s (at %q)", path, step)
		}
	}
	return node
}

// limit returns the integer keyword (maxItems, maxLength) of the schema at path.
func limit(t *testing.T, schema map[string]any, path, keyword string) int {
	t.Helper()
	node := schemaAt(t, schema, path)
	n, err := strconv.Atoi(fmt.Sprint(node[keyword]))
	if err != nil {
		t.Fatalf("%s has no integer %s: %v", path, keyword, node[keyword])
	}
	return n
}

// enum returns the enum of the schema at path, sorted.
func enum(t *testing.T, schema map[string]any, path string) []string {
	t.Helper()
	values, _ := schemaAt(t, schema, path)["enum"].([]any)
	out := make([]string, len(values))
	for i, v := range values {
		out[i] = fmt.Sprint(v)
	}
	slices.Sort(out)
	return out
}

// TestLimitsMatchTheCRDs: each size limit the Go code enforces or relies on equals the CRD's
// own (the markers are literals, so a marker changed without its constant, or the reverse, fails
// here), and the derived fields fit those limits in the worst case the caps allow.
func TestLimitsMatchTheCRDs(t *testing.T) {
	endpoint := crdSchema(t, "mesh.aether.io_meshendpoints.yaml")
	service := crdSchema(t, "mesh.aether.io_meshservices.yaml")
	for _, c := range []struct {
		what   string
		schema map[string]any
		path   string
		word   string
		want   int
	}{
		{"MaxPorts (ports per endpoint)", endpoint, "spec.ports", "maxItems", meshv1alpha1.MaxPorts},
		{"portspec.MaxPorts (ports per pod at admission)", endpoint, "spec.ports", "maxItems", portspec.MaxPorts},
		{"MaxPortsSummary", endpoint, "spec.portsSummary", "maxLength", meshv1alpha1.MaxPortsSummary},
		{"MaxServicePorts (ports per service)", service, "status.ports", "maxItems", meshv1alpha1.MaxServicePorts},
		{"MaxPortsSummary", service, "status.portsSummary", "maxLength", meshv1alpha1.MaxPortsSummary},
		{"MaxDialSurface", service, "status.dialSurface", "maxItems", meshv1alpha1.MaxDialSurface},
		{"resolve.SurfaceLen(MaxServicePorts) (the surface at the cap)", service, "status.dialSurface", "maxItems",
			resolve.SurfaceLen(meshv1alpha1.MaxServicePorts)},
		{"MaxDialAddress", service, "status.dialSurface.[].address", "maxLength", meshv1alpha1.MaxDialAddress},
		{"MaxDialReason", service, "status.dialSurface.[].reason", "maxLength", meshv1alpha1.MaxDialReason},
		{"MaxNames", service, "status.names", "maxItems", meshv1alpha1.MaxNames},
		{"len(resolve.Names)", service, "status.names", "maxItems", len(resolve.Names("s", "n", resolve.DefaultMeshDomain))},
		{"MaxNameLength", service, "status.names.[]", "maxLength", meshv1alpha1.MaxNameLength},
		{"MaxLocalNameLength", service, "status.localName", "maxLength", meshv1alpha1.MaxLocalNameLength},
	} {
		if got := limit(t, c.schema, c.path, c.word); got != c.want {
			t.Errorf("%s is %d, the CRD's %s %s is %d", c.what, c.want, c.path, c.word, got)
		}
	}

	// The dial surface of a service at the cap, each row once: exactly MaxItems rows, each address
	// within its MaxLength (the longest spells a five-digit port).
	set := portspec.PortSet{Primary: 65535 - meshv1alpha1.MaxServicePorts + 1}
	for p := range int32(meshv1alpha1.MaxServicePorts) {
		set.Ports = append(set.Ports, portspec.Port{Port: set.Primary + p, Protocol: meshv1alpha1.ProtocolTCP})
	}
	surface := resolve.DialSurface(set, workloadidentity.SPIRE)
	if len(surface) != meshv1alpha1.MaxDialSurface {
		t.Errorf("a service of %d ports has %d dial rows; dialSurface holds %d", meshv1alpha1.MaxServicePorts, len(surface), meshv1alpha1.MaxDialSurface)
	}
	// Without an identity issuer the same rows, each TCP row's reason longer: each within its limit.
	without := resolve.DialSurface(set, workloadidentity.NoIssuer)
	if len(without) != meshv1alpha1.MaxDialSurface {
		t.Errorf("without an issuer, a service of %d ports has %d dial rows; dialSurface holds %d", meshv1alpha1.MaxServicePorts, len(without),
			meshv1alpha1.MaxDialSurface)
	}
	for _, d := range without {
		if len(d.Reason) > meshv1alpha1.MaxDialReason {
			t.Errorf("without an issuer, %s has a reason of %d bytes; the CRD holds %d", d.Address, len(d.Reason), meshv1alpha1.MaxDialReason)
		}
	}
	for _, d := range surface {
		if len(d.Address) > meshv1alpha1.MaxDialAddress {
			t.Errorf("dial address %q has %d bytes; the CRD holds %d", d.Address, len(d.Address), meshv1alpha1.MaxDialAddress)
		}
	}

	// An endpoint's widest ports spelling: 64 five-digit HTTP2 ports. It must fit whole.
	var widest []meshv1alpha1.PortProtocol
	for p := range int32(meshv1alpha1.MaxPorts) {
		widest = append(widest, meshv1alpha1.PortProtocol{Port: 60000 + p, Protocol: meshv1alpha1.ProtocolHTTP2})
	}
	if got := meshv1alpha1.FormatPorts(widest); strings.Contains(got, "more") || len(got) > meshv1alpha1.MaxPortsSummary {
		t.Errorf("64 ports of one endpoint do not fit its portsSummary whole: %d bytes, %q", len(got), got)
	}
}
