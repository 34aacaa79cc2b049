// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Package testenv runs a real kube-apiserver and etcd — built from the Go module proxy by
// hack/build-binaries.sh and cached by version — with this project's CRDs and the Gateway API
// standard-channel CRDs (from the sigs.k8s.io/gateway-api module) installed. Tests start one per
// package from TestMain (see Run); `make run` starts one for people to try the operator.
//
// Nothing here fakes the API server: validation, CEL rules, printer columns, server-side apply
// and admission are the real ones.
package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwapiv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	configv1 "github.com/aether-mesh/aether-operator/api/config/v1"
	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
)

// GatewayAPIModule is the module whose standard-channel CRDs are installed.
const GatewayAPIModule = "sigs.k8s.io/gateway-api"

// Env is a running control plane and the means to talk to it.
type Env struct {
	// Config reaches the API server as a cluster admin.
	Config *rest.Config
	// Client is a controller-runtime client with the core, mesh and Gateway API types.
	Client client.Client
	// Scheme holds the core, mesh and Gateway API types.
	Scheme *k8sruntime.Scheme
	// Kubeconfig is the path of a kubeconfig file for the same admin, for kubectl.
	Kubeconfig string
	// Assets is the directory holding kube-apiserver, etcd and kubectl.
	Assets string

	env *envtest.Environment
	dir string
}

// Webhook returns where this process must serve the installed webhooks: host, port and the
// directory of the serving certificate (tls.crt, tls.key) the API server trusts.
func (e *Env) Webhook() (host string, port int, certDir string) {
	o := e.env.WebhookInstallOptions
	return o.LocalServingHost, o.LocalServingPort, o.LocalServingCertDir
}

// NewScheme returns a scheme with the core, mesh and Gateway API types.
func NewScheme() *k8sruntime.Scheme {
	s := k8sruntime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(meshv1alpha1.AddToScheme(s))
	utilruntime.Must(configv1.AddToScheme(s))
	utilruntime.Must(gwapiv1.Install(s))
	utilruntime.Must(gwapiv1beta1.Install(s))
	return s
}

// Options select what a control plane gets beyond the CRDs.
type Options struct {
	// Webhooks installs config/webhook's configurations, pointed at a server this process runs
	// (on WebhookHost:WebhookPort with the certificate in WebhookCertDir).
	Webhooks bool
	// APIServerFlags set kube-apiserver flags (name without the dashes → value), replacing
	// envtest's default of the same name: a benchmark widens --service-cluster-ip-range (envtest's
	// /24 holds ≈ 250 ClusterIPs) and turns the audit log on.
	APIServerFlags map[string]string
}

// Start builds (or reuses) the binaries, starts etcd and kube-apiserver, and installs the CRDs.
func Start() (*Env, error) { return StartWith(Options{}) }

// StartWith is Start with options.
func StartWith(opts Options) (*Env, error) {
	root := RepoRoot()
	assets, err := Assets()
	if err != nil {
		return nil, err
	}
	gatewayCRDs, err := GatewayAPICRDDir()
	if err != nil {
		return nil, err
	}
	e := &Env{Assets: assets, Scheme: NewScheme()}
	e.env = &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDInstallOptions: envtest.CRDInstallOptions{
			Paths:              []string{filepath.Join(root, "config", "crd", "bases"), gatewayCRDs},
			ErrorIfPathMissing: true,
			Scheme:             e.Scheme,
		},
		Scheme: e.Scheme,
	}
	for name, value := range opts.APIServerFlags {
		e.env.ControlPlane.GetAPIServer().Configure().Set(name, value)
	}
	if opts.Webhooks {
		e.env.WebhookInstallOptions = envtest.WebhookInstallOptions{
			Paths:                    []string{filepath.Join(root, "config", "webhook")},
			IgnoreErrorIfPathMissing: false,
		}
	}
	if e.Config, err = e.env.Start(); err != nil {
		// envtest may have started etcd and kube-apiserver before failing (a CRD the API server
		// refuses): stop them, or they outlive the test.
		return nil, errors.Join(fmt.Errorf("starting kube-apiserver and etcd from %s: %w", assets, err), e.env.Stop())
	}
	if e.Client, err = client.New(e.Config, client.Options{Scheme: e.Scheme}); err != nil {
		return nil, errors.Join(err, e.Stop())
	}
	if e.dir, err = os.MkdirTemp("", "aether-testenv-"); err != nil {
		return nil, errors.Join(err, e.Stop())
	}
	if e.Kubeconfig, err = e.writeKubeconfig(); err != nil {
		return nil, errors.Join(err, e.Stop())
	}
	return e, nil
}

// writeKubeconfig writes a kubeconfig for a member of system:masters.
func (e *Env) writeKubeconfig() (string, error) {
	return e.UserKubeconfig("aether-admin", "system:masters")
}

// UserKubeconfig provisions user name (a client certificate, in groups) and writes a kubeconfig
// for it: a process run as its binary (the manager in hack/bench) then speaks as its own user,
// whose requests the audit log and RBAC tell apart. The file goes with the control plane.
func (e *Env) UserKubeconfig(name string, groups ...string) (string, error) {
	user, err := e.env.AddUser(envtest.User{Name: name, Groups: groups}, nil)
	if err != nil {
		return "", fmt.Errorf("adding user %s: %w", name, err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		return "", fmt.Errorf("rendering the kubeconfig of %s: %w", name, err)
	}
	file := "kubeconfig"
	if name != "aether-admin" {
		file = "kubeconfig-" + name
	}
	path := filepath.Join(e.dir, file)
	return path, os.WriteFile(path, kubeconfig, 0o600)
}

// Stop stops the API server and etcd and removes their data.
func (e *Env) Stop() error {
	err := e.env.Stop()
	if e.dir != "" {
		err = errors.Join(err, os.RemoveAll(e.dir))
	}
	return err
}

// Kubectl runs the real kubectl (from Assets) against the API server as the admin.
func (e *Env) Kubectl(ctx context.Context, args ...string) (stdout, stderr string, err error) {
	cmd := exec.CommandContext(ctx, filepath.Join(e.Assets, "kubectl"), append([]string{"--kubeconfig", e.Kubeconfig}, args...)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.String(), errOut.String(), err
}

// Namespace creates a namespace with a unique name for one test and returns its name. The caller
// deletes it when done (t.Cleanup), or leaves it to the end of the package's API server.
func (e *Env) Namespace(ctx context.Context, prefix string) (string, error) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	if err := e.Client.Create(ctx, ns); err != nil {
		return "", fmt.Errorf("creating a test namespace: %w", err)
	}
	return ns.Name, nil
}

// RepoRoot is the repository's top directory.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// Assets returns the directory holding kube-apiserver, etcd and kubectl: $KUBEBUILDER_ASSETS
// when set, else the cache that hack/build-binaries.sh fills (building it on first use, which
// takes about ten minutes on two cores).
func Assets() (string, error) {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir, nil
	}
	cmd := exec.Command("bash", filepath.Join(RepoRoot(), "hack", "build-binaries.sh"))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("hack/build-binaries.sh: %w", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return lines[len(lines)-1], nil
}

// GatewayAPICRDDir is the standard-channel CRD directory inside the sigs.k8s.io/gateway-api
// module this repository requires (go.mod pins the version).
func GatewayAPICRDDir() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", GatewayAPIModule)
	cmd.Dir = RepoRoot()
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("locating module %s (go list -m): %w", GatewayAPIModule, err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "config", "crd", "standard")
	if _, err := os.Stat(dir); err != nil {
		return "", fmt.Errorf("gateway API standard CRDs: %w", err)
	}
	return dir, nil
}

// ClientAs returns a client that impersonates user, with groups and extra user info (for example
// a token's authentication.kubernetes.io/node-name claim), as the API server's authorization and
// admission see them.
func (e *Env) ClientAs(user string, groups []string, extra map[string][]string) (client.Client, error) {
	cfg := rest.CopyConfig(e.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups, Extra: extra}
	return client.New(cfg, client.Options{Scheme: e.Scheme})
}
