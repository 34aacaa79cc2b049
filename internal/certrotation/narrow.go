// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package certrotation

import (
	"net/http"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// narrowed is mgr as the rotator sees it: its rest config's lists and watches of the Secrets of
// key's namespace carry the field selector metadata.name=<key's name>. cert-controller builds a
// cache of its own from mgr.GetConfig(), of every Secret of the namespace, and takes no option
// to narrow it; the manager's Role lets it list and watch its one Secret only (by name: the API
// server authorizes a list or watch with that selector as one of that name), so unnarrowed that
// cache would never sync and the rotation never start. Everything else passes untouched.
func narrowed(mgr manager.Manager, key types.NamespacedName) manager.Manager {
	cfg := rest.CopyConfig(mgr.GetConfig())
	collection := "/api/v1/namespaces/" + key.Namespace + "/secrets"
	selector := fields.OneTermEqualSelector("metadata.name", key.Name).String()
	cfg.Wrap(func(next http.RoundTripper) http.RoundTripper {
		return &nameSelector{next: next, collection: collection, selector: selector}
	})
	return &narrowedManager{Manager: mgr, cfg: cfg}
}

type narrowedManager struct {
	manager.Manager
	cfg *rest.Config
}

func (m *narrowedManager) GetConfig() *rest.Config { return m.cfg }

// nameSelector adds selector to a GET of collection (a list, or a watch) that has no field
// selector of its own.
type nameSelector struct {
	next                 http.RoundTripper
	collection, selector string
}

func (s *nameSelector) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet || req.URL.Path != s.collection || req.URL.Query().Has("fieldSelector") {
		return s.next.RoundTrip(req)
	}
	// A RoundTripper must not change the caller's request: a copy with its own URL.
	narrowed := req.Clone(req.Context())
	q := narrowed.URL.Query()
	q.Set("fieldSelector", s.selector)
	narrowed.URL.RawQuery = q.Encode()
	return s.next.RoundTrip(narrowed)
}
