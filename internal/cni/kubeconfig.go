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

// Kubeconfig renders cfg (the agent's own credentials: in a cluster its pod's bound
// service-account token) as a self-contained kubeconfig: the CA, token and client certificate
// embedded, read from their files now. The plugin reads it only when the agent cannot be reached,
// to tell whether a pod might be meshed. A bound token stops working when the agent's pod is
// deleted: the plugin then fails closed until the next agent writes its own.
func Kubeconfig(cfg *rest.Config) ([]byte, error) {
	read := func(data []byte, file, what string) ([]byte, error) {
		if len(data) > 0 || file == "" {
			return data, nil
		}
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("reading the %s for the plugin's kubeconfig: %w", what, err)
		}
		return b, nil
	}
	ca, err := read(cfg.CAData, cfg.CAFile, "API server's CA")
	if err != nil {
		return nil, err
	}
	token, err := read([]byte(cfg.BearerToken), cfg.BearerTokenFile, "service-account token")
	if err != nil {
		return nil, err
	}
	cert, err := read(cfg.CertData, cfg.CertFile, "client certificate")
	if err != nil {
		return nil, err
	}
	key, err := read(cfg.KeyData, cfg.KeyFile, "client key")
	if err != nil {
		return nil, err
	}
	const name = "aether-agent"
	kc := clientcmdapi.NewConfig()
	kc.Clusters[name] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: ca,
		InsecureSkipTLSVerify: cfg.Insecure, TLSServerName: cfg.ServerName}
	kc.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: string(token), ClientCertificateData: cert, ClientKeyData: key,
		Impersonate: cfg.Impersonate.UserName, ImpersonateUID: cfg.Impersonate.UID,
		ImpersonateGroups: cfg.Impersonate.Groups, ImpersonateUserExtra: cfg.Impersonate.Extra}
	kc.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	kc.CurrentContext = name
	return clientcmd.Write(*kc)
}

// WriteKubeconfig writes cfg's kubeconfig to path (mode 0600: it holds a credential) when its
// content differs from the file's; it reports whether it wrote.
func WriteKubeconfig(path string, cfg *rest.Config) (bool, error) {
	data, err := Kubeconfig(cfg)
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
