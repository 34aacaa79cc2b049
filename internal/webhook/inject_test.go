// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package webhook

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/aether-mesh/aether-operator/internal/portspec"
	"github.com/aether-mesh/aether-operator/internal/proxyless"
)

var proxylessGRPC = map[string]string{portspec.AnnotationProxyless: portspec.ProxylessGRPC}

// expand resolves a container's $(VAR) references to earlier variables as the kubelet does, with
// fieldRefs resolved from pod: enough of the kubelet's expansion for the injected variables.
func expand(t *testing.T, pod *corev1.Pod, c corev1.Container, name string) string {
	t.Helper()
	values := map[string]string{}
	for _, e := range c.Env {
		v := e.Value
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			v = map[string]string{"metadata.name": pod.Name, "metadata.namespace": pod.Namespace}[e.ValueFrom.FieldRef.FieldPath]
		}
		for k, kv := range values {
			v = strings.ReplaceAll(v, "$("+k+")", kv)
		}
		if e.Name == name {
			return v
		}
		values[e.Name] = v
	}
	t.Fatalf("container %s has no %s", c.Name, name)
	return ""
}

// TestProxylessPodInjected: a managed pod annotated aether.io/proxyless: "grpc", created from a
// generateName (it has no name when it is admitted), gets in every container the pod's name and
// namespace, then a bootstrap whose node ID the kubelet expands to <namespace>/<pod>, announcing a
// proxyless client that sends SNI, the agent's socket where the mount puts it, the file_watcher
// provider the clusters name, and GRPC_EXPERIMENTAL_XDS_SNI=true; the node's proxyless socket
// directory is mounted read-only. What a container sets itself is kept, with a warning.
func TestProxylessPodInjected(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t, ctx)
	c, warnings := warningClient(t)
	p := pod(ns, true, proxylessGRPC)
	p.Name, p.GenerateName = "", "client-"
	p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "sidecar", Image: "registry.example/sidecar:1",
		Env: []corev1.EnvVar{{Name: proxyless.EnvSNI, Value: "false"}}})
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	if got := warnings.take(); !slices.ContainsFunc(got, func(w string) bool {
		return strings.Contains(w, "container sidecar sets GRPC_EXPERIMENTAL_XDS_SNI itself: it is kept")
	}) {
		t.Errorf("warnings %q, want one about the sidecar's own GRPC_EXPERIMENTAL_XDS_SNI", got)
	}

	i := slices.IndexFunc(p.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == ProxylessVolume })
	if i < 0 || p.Spec.Volumes[i].HostPath.Path != proxyless.NodeSocketDir || *p.Spec.Volumes[i].HostPath.Type != corev1.HostPathDirectory {
		t.Fatalf("volumes %+v, want %s: hostPath %s (Directory)", p.Spec.Volumes, ProxylessVolume, proxyless.NodeSocketDir)
	}
	for _, container := range p.Spec.Containers {
		m := slices.IndexFunc(container.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == ProxylessVolume })
		if m < 0 || container.VolumeMounts[m].MountPath != proxyless.SocketDir || !container.VolumeMounts[m].ReadOnly {
			t.Errorf("container %s mounts %+v, want %s read-only at %s", container.Name, container.VolumeMounts, ProxylessVolume, proxyless.SocketDir)
		}
		var doc struct {
			Servers []struct {
				URI string `json:"server_uri"`
			} `json:"xds_servers"`
			Node struct {
				ID       string            `json:"id"`
				Metadata map[string]string `json:"metadata"`
			} `json:"node"`
			Providers map[string]struct {
				Config map[string]string `json:"config"`
			} `json:"certificate_providers"`
		}
		if err := json.Unmarshal([]byte(expand(t, p, container, proxyless.EnvBootstrap)), &doc); err != nil {
			t.Fatal(err)
		}
		if doc.Node.ID != proxyless.NodeID(ns, p.Name) || !strings.HasPrefix(p.Name, "client-") ||
			doc.Node.Metadata[proxyless.MetadataProxyless] != "true" || doc.Node.Metadata[proxyless.MetadataSNI] != "true" ||
			len(doc.Servers) != 1 || doc.Servers[0].URI != "unix://"+proxyless.SocketDir+"/xds.sock" ||
			doc.Providers[proxyless.CertificateProvider].Config["certificate_file"] != proxyless.CertificateFile {
			t.Errorf("container %s's bootstrap, expanded: %+v (pod %s)", container.Name, doc, p.Name)
		}
	}
	if sni := expand(t, p, p.Spec.Containers[0], proxyless.EnvSNI); sni != "true" {
		t.Errorf("app: %s=%q, want true", proxyless.EnvSNI, sni)
	}
	if sni := expand(t, p, p.Spec.Containers[1], proxyless.EnvSNI); sni != "false" {
		t.Errorf("sidecar: %s=%q, want its own false", proxyless.EnvSNI, sni)
	}
}

// TestOnlyProxylessPodsInjected: a managed pod without the annotation gets the identity gate and
// nothing of proxyless gRPC, an annotated pod that is not in the mesh (its label is not "true")
// is admitted as it is; an annotation of another value is denied with the parser's words (the
// injector leaves it to the validator).
func TestOnlyProxylessPodsInjected(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t, ctx)
	for name, p := range map[string]*corev1.Pod{
		"managed, not annotated":     pod(ns, true, nil),
		"annotated, label not true":  labelled(ns, "yes", proxylessGRPC),
		"annotated, no label at all": pod(ns, false, proxylessGRPC),
	} {
		if err := env.Client.Create(ctx, p); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if slices.ContainsFunc(p.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == ProxylessVolume || v.Name == IdentityVolume }) ||
			len(p.Spec.Containers[0].Env) != 0 || len(p.Spec.Containers[0].VolumeMounts) != 0 || hasContainer(p.Spec.InitContainers, FilesContainer) {
			t.Errorf("%s: injected proxyless gRPC: %+v", name, p.Spec)
		}
		if managed := portspec.IsManaged(p.Labels); hasContainer(p.Spec.InitContainers, GateContainer) != managed {
			t.Errorf("%s: the identity gate in %v, want it only in a managed pod", name, p.Spec.InitContainers)
		}
	}
	err := env.Client.Create(ctx, pod(ns, true, map[string]string{portspec.AnnotationProxyless: "gRPC"}))
	want := denied + `aether.io/proxyless: "gRPC": unknown proxyless mode "gRPC"`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("aether.io/proxyless: gRPC: %v, want %q", err, want)
	}
}

// TestInjectProxylessOnce: injecting a pod injected already changes nothing.
func TestInjectProxylessOnce(t *testing.T) {
	p := pod("ns", true, proxylessGRPC)
	if _, err := InjectProxyless(p); err != nil {
		t.Fatal(err)
	}
	once := p.DeepCopy()
	if w, err := InjectProxyless(p); err != nil || len(w) != 0 || !equalPods(once, p) {
		t.Errorf("a second injection: %v, %v, changed: %v", w, err, !equalPods(once, p))
	}
}

func equalPods(a, b *corev1.Pod) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}
