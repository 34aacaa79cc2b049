// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package cni

import (
	"fmt"
	"os"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// DefaultKubeconfig is where the agent keeps the plugin's kubeconfig unless --cni-kubeconfig
// says otherwise: beside the socket, in the agent's run directory on the host (a tmpfs on most
// distributions: the token never reaches a disk).
const DefaultKubeconfig = DefaultRunDir + "/kubeconfig"

// Kubeconfig renders a self-contained kubeconfig that reaches cfg's API server (its address and
// CA, the CA embedded, read from its file now) with token alone: the token of the plugin's own
// ServiceAccount, which may only get pods (config/rbac/cni), never the agent's credentials. The
// plugin reads it only when the agent cannot be reached, to tell whether a pod might be meshed.
// The token lives an hour unless the agent renews it: when no agent has run for that long, the
// plugin fails closed until the next agent writes a new one.
func Kubeconfig(cfg *rest.Config, token string) ([]byte, error) {
	if token == "" {
		return nil, fmt.Errorf("no token for the plugin's kubeconfig: it carries the plugin's own ServiceAccount token and nothing else")
	}
	ca := cfg.CAData
	if len(ca) == 0 && cfg.CAFile != "" {
		b, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("reading the API server's CA for the plugin's kubeconfig: %w", err)
		}
		ca = b
	}
	const name = "aether-cni"
	kc := clientcmdapi.NewConfig()
	kc.Clusters[name] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: ca,
		InsecureSkipTLSVerify: cfg.Insecure, TLSServerName: cfg.ServerName}
	kc.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: token}
	kc.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	kc.CurrentContext = name
	return clientcmd.Write(*kc)
}

// WriteKubeconfig writes Kubeconfig(cfg, token) to path (mode 0600: it holds a credential) when
// its content differs from the file's; it reports whether it wrote.
func WriteKubeconfig(path string, cfg *rest.Config, token string) (bool, error) {
	data, err := Kubeconfig(cfg, token)
	if err != nil {
		return false, err
	}
	if old, err := os.ReadFile(path); err == nil && string(old) == string(data) {
		return false, nil
	}
	if err := WriteFileAtomic(path, data, 0o600); err != nil {
		return false, fmt.Errorf("writing the plugin's kubeconfig %s: %w", path, err)
	}
	return true, nil
}
