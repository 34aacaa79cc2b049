// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package certrotation

import (
	"net/http"
	"testing"
)

// recorder is the next RoundTripper: it keeps the URL of what it was sent.
type recorder struct{ got string }

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	r.got = req.URL.String()
	return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody}, nil
}

// TestNameSelector: a list or watch of the namespace's Secrets without a field selector gets the
// Secret's; anything else (another namespace's Secrets, one Secret by name, a write, a request
// that has its own selector) passes as it came, and the caller's request is never changed.
func TestNameSelector(t *testing.T) {
	const collection = "/api/v1/namespaces/ops/secrets"
	for name, tc := range map[string]struct{ method, url, want string }{
		"list":               {"GET", "https://api" + collection + "?limit=500", "https://api" + collection + "?fieldSelector=metadata.name%3Dcert&limit=500"},
		"watch":              {"GET", "https://api" + collection + "?watch=true", "https://api" + collection + "?fieldSelector=metadata.name%3Dcert&watch=true"},
		"its own selector":   {"GET", "https://api" + collection + "?fieldSelector=type%3DOpaque", "https://api" + collection + "?fieldSelector=type%3DOpaque"},
		"one by name":        {"GET", "https://api" + collection + "/cert", "https://api" + collection + "/cert"},
		"another namespace":  {"GET", "https://api/api/v1/namespaces/other/secrets", "https://api/api/v1/namespaces/other/secrets"},
		"webhook configs":    {"GET", "https://api/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations", "https://api/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"},
		"a write, not a get": {"POST", "https://api" + collection, "https://api" + collection},
	} {
		t.Run(name, func(t *testing.T) {
			next := &recorder{}
			s := &nameSelector{next: next, collection: collection, selector: "metadata.name=cert"}
			req, err := http.NewRequest(tc.method, tc.url, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.RoundTrip(req); err != nil {
				t.Fatal(err)
			}
			if next.got != tc.want {
				t.Errorf("sent %s, want %s", next.got, tc.want)
			}
			if req.URL.String() != tc.url {
				t.Errorf("the caller's request became %s", req.URL)
			}
		})
	}
}
