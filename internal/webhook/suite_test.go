// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package webhook

import (
	"os"
	"testing"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/aether-mesh/aether-operator/internal/testenv"
)

// env is this package's real kube-apiserver and etcd, with config/webhook installed and pointed
// at the webhook server this test process runs, and config/admission applied.
var env *testenv.Env

func TestMain(m *testing.M) {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	testenv.RunWith(m, testenv.Options{Webhooks: true}, &env, startWebhookServer, testenv.InstallNodeAuthority)
}

// startWebhookServer serves the pod validator where the API server was told to call it.
func startWebhookServer(e *testenv.Env) (func(), error) {
	host, port, certDir := e.Webhook()
	mgr, err := ctrl.NewManager(e.Config, ctrl.Options{
		Scheme:                 e.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		WebhookServer:          crwebhook.NewServer(crwebhook.Options{Host: host, Port: port, CertDir: certDir}),
	})
	if err != nil {
		return nil, err
	}
	SetupWithManager(mgr, Options{Ignored: handlerIgnored, Identity: testIdentity})
	// The same injector for a mesh without SPIRE, which TestNoIdentityWithoutSPIRE points the
	// injector's configuration at.
	mgr.GetWebhookServer().Register(withoutSPIREPath, &crwebhook.Admission{Handler: &PodInjector{
		Decoder: admission.NewDecoder(mgr.GetScheme()), Ignored: handlerIgnored, Identity: Identity{Image: testIdentity.Image}}})
	return testenv.StartManager(mgr)
}
