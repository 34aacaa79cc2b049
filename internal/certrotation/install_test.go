// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package certrotation

import (
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/aether-mesh/aether-operator/internal/testenv"
)

// TestInstallNamesOneSecret builds the install as users do (kustomize, config/default) and checks
// that the four places naming the webhooks' certificate Secret name the same one, under the name
// prefix: the Secret the install makes, the Role's resourceNames, the manager's
// --cert-rotation-secret and the volume it mounts. With cert-manager
// (config/overlays/cert-manager) the install makes no Secret (cert-manager makes its own, of
// another type) and the Certificate writes the one the manager mounts.
func TestInstallNamesOneSecret(t *testing.T) {
	def := build(t, "config/default")
	secrets := def.secrets("app.kubernetes.io/component", "webhook-cert-rotation")
	if len(secrets) != 1 {
		t.Fatalf("config/default makes %d Secrets for the webhooks' certificate, want one (config/manager/webhook_cert_secret.yaml)", len(secrets))
	}
	made := secrets[0].Name
	if !strings.HasPrefix(made, "aether-operator-") {
		t.Errorf("the Secret is %q, without config/base's namePrefix", made)
	}
	role, manager := def.role(t, "aether-operator-webhook-cert-role"), def.manager(t)
	named := map[string][]string{"the Role's resourceNames": nil, "--cert-rotation-secret": nil, "the mounted volume": {manager.volume}}
	for _, r := range role.Rules {
		named["the Role's resourceNames"] = append(named["the Role's resourceNames"], r.ResourceNames...)
	}
	named["--cert-rotation-secret"] = []string{manager.flags["--cert-rotation-secret"]}
	for where, names := range named {
		if len(names) != 1 || names[0] != made {
			t.Errorf("%s: %q, want the install's Secret %q only", where, names, made)
		}
	}
	for _, r := range role.Rules {
		for _, v := range r.Verbs {
			if v == "create" || v == "delete" || v == "patch" {
				t.Errorf("the Role grants %s on Secrets: the install makes the Secret, the rotation only reads and updates it", v)
			}
		}
	}

	cm := build(t, "config/overlays/cert-manager")
	if s := cm.secrets("app.kubernetes.io/component", "webhook-cert-rotation"); len(s) != 0 {
		t.Errorf("with cert-manager the install still makes Secret %s: cert-manager's Certificate could not write its kubernetes.io/tls Secret over it", s[0].Name)
	}
	certificate := cm.find("Certificate", "aether-operator-serving-cert")
	var spec struct {
		Spec struct {
			SecretName string `json:"secretName"`
		} `json:"spec"`
	}
	if certificate == nil {
		t.Fatal("config/overlays/cert-manager has no Certificate aether-operator-serving-cert")
	}
	if err := yaml.Unmarshal(certificate, &spec); err != nil {
		t.Fatal(err)
	}
	if mounted := cm.manager(t).volume; spec.Spec.SecretName != mounted {
		t.Errorf("with cert-manager the Certificate writes Secret %q and the manager mounts %q", spec.Spec.SecretName, mounted)
	}
}

// built is a kustomize build's objects, each as YAML, by kind.
type built map[string][][]byte

func build(t *testing.T, dir string) built {
	t.Helper()
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), filepath.Join(testenv.RepoRoot(), dir))
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	out := built{}
	for _, r := range m.Resources() {
		data, err := r.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		out[r.GetKind()] = append(out[r.GetKind()], data)
	}
	return out
}

// find is the object of kind named name, as YAML; nil when there is none.
func (b built) find(kind, name string) []byte {
	for _, data := range b[kind] {
		var meta struct {
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if yaml.Unmarshal(data, &meta) == nil && meta.Metadata.Name == name {
			return data
		}
	}
	return nil
}

// secrets are the Secrets labelled key=value.
func (b built) secrets(key, value string) []corev1.Secret {
	var out []corev1.Secret
	for _, data := range b["Secret"] {
		var s corev1.Secret
		if yaml.Unmarshal(data, &s) == nil && s.Labels[key] == value {
			out = append(out, s)
		}
	}
	return out
}

func (b built) role(t *testing.T, name string) rbacv1.Role {
	t.Helper()
	var r rbacv1.Role
	data := b.find("Role", name)
	if data == nil {
		t.Fatalf("no Role %s", name)
	}
	if err := yaml.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// managerPod is what the manager's Deployment says of the certificate: its container's flags
// (--name=value) and the Secret its volume webhook-certs mounts.
type managerPod struct {
	flags  map[string]string
	volume string
}

func (b built) manager(t *testing.T) managerPod {
	t.Helper()
	var d appsv1.Deployment
	data := b.find("Deployment", "aether-operator-controller-manager")
	if data == nil {
		t.Fatal("no Deployment aether-operator-controller-manager")
	}
	if err := yaml.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	p := managerPod{flags: map[string]string{}}
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name != "manager" {
			continue
		}
		for _, a := range c.Args {
			if k, v, ok := strings.Cut(a, "="); ok {
				p.flags[k] = v
			}
		}
	}
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Name == "webhook-certs" && v.Secret != nil {
			p.volume = v.Secret.SecretName
		}
	}
	return p
}
