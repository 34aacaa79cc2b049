// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdssim

import (
	"errors"
	"testing"

	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// TestNormalizePath: the path a normalizing connection manager hands its RBAC filter is the one
// the application is sent, so no spelling of /admin passes as /api/…; without normalization the
// path is left as sent.
func TestNormalizePath(t *testing.T) {
	normalizing := &hcmv3.HttpConnectionManager{NormalizePath: wrapperspb.Bool(true), MergeSlashes: true,
		PathWithEscapedSlashesAction: hcmv3.HttpConnectionManager_REJECT_REQUEST}
	for _, tc := range []struct {
		in, want string
		status   int
	}{
		{"/api/x", "/api/x", 0},
		{"/api/../admin", "/admin", 0},
		{"/api/./x/../../admin?q=/api", "/admin?q=/api", 0},
		{"/api/%2e%2e/admin", "/admin", 0},
		{"/api/%2E%2e/admin", "/admin", 0},
		{"//admin", "/admin", 0},
		{"/api//x", "/api/x", 0},
		{"/..", "/", 0},
		{"/api/", "/api/", 0},
		{"/api%2F..%2Fadmin", "", 400},
		{"/api/x%5c..%5cadmin", "", 400},
	} {
		got, status, err := normalizePath(normalizing, tc.in)
		if got != tc.want || status != tc.status || (status != 0) != errors.Is(err, ErrBadRequest) {
			t.Errorf("normalizePath(%q) = %q, %d, %v; want %q, %d", tc.in, got, status, err, tc.want, tc.status)
		}
	}
	if got, _, err := normalizePath(&hcmv3.HttpConnectionManager{}, "/api/../admin"); got != "/api/../admin" || err != nil {
		t.Errorf("without normalization: %q, %v; want the path as sent", got, err)
	}
}
