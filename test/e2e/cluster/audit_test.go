//go:build e2e

// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package cluster

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
)

// The API server's audit log (hack/cluster/up.sh's policy): every request but a get of the
// operator's ServiceAccounts, and every write of the mesh's kinds and routes by anyone, at
// Metadata level. The fault specs count the mesh's writes and see its relists in it: it outlives
// the processes it counts (an agent's own metrics restart from zero with it), and it names each
// object written.

// The operator's ServiceAccounts, as the API server names their requests' users.
const (
	operatorNamespace = "aether-operator-system"
	managerUser       = "system:serviceaccount:" + operatorNamespace + ":aether-operator-controller-manager"
	agentUser         = "system:serviceaccount:" + operatorNamespace + ":aether-operator-agent"
	// garbageCollector deletes a MeshEndpoint whose owner, its pod, is gone.
	garbageCollector = "system:serviceaccount:kube-system:generic-garbage-collector"
)

// request is one audited request.
type request struct {
	// At is when the API server received it.
	At time.Time
	// User is who made it (the impersonated user, when impersonated).
	User string
	// Verb is the API verb (create, update, patch, delete, list, watch …).
	Verb string
	// Group, Resource, Subresource, Namespace and Name say what it was made to.
	Group, Resource, Subresource, Namespace, Name string
	// URI is the request's URI (a relisting watch asks sendInitialEvents=true).
	URI string
	// Code is the response's HTTP status code (0 when none was recorded).
	Code int32
}

// writeVerbs are the verbs that change an object.
var writeVerbs = []string{"create", "update", "patch", "delete", "deletecollection"}

// IsWrite reports whether r changes something.
func (r request) IsWrite() bool { return slices.Contains(writeVerbs, r.Verb) }

// Object is r's object as "resource[/subresource] namespace/name".
func (r request) Object() string {
	resource := r.Resource
	if r.Subresource != "" {
		resource += "/" + r.Subresource
	}
	return resource + " " + r.Namespace + "/" + r.Name
}

func (r request) String() string {
	return fmt.Sprintf("%s %s %s %s (%d)", r.At.Format("15:04:05.000"), strings.TrimPrefix(r.User, "system:serviceaccount:"), r.Verb, r.Object(), r.Code)
}

// IsRelist reports whether r (re)fills a client's cache from scratch: a list, or a watch that
// asks for the initial state (client-go's streaming list, on by default since 1.35). A watch
// resumed from a resourceVersion is not one.
func (r request) IsRelist() bool {
	return r.Verb == "list" || (r.Verb == "watch" && strings.Contains(r.URI, "sendInitialEvents=true"))
}

// auditLog is the audit log's path on the node (this test runs on the node's file system).
func auditLog() string { return filepath.Join(clusterState(), "logs", "audit.log") }

// audited reads the requests the API server received in [from, to), in order. A watch is
// counted once, when it started (its ResponseStarted stage); every other request once, when it
// completed.
func audited(from, to time.Time) []request {
	GinkgoHelper()
	f, err := os.Open(auditLog())
	Expect(err).NotTo(HaveOccurred(), "the API server's audit log (hack/cluster/up.sh turns it on)")
	defer func() { _ = f.Close() }()
	var out []request
	lines := bufio.NewScanner(f)
	lines.Buffer(make([]byte, 1<<20), 16<<20)
	for lines.Scan() {
		var e auditv1.Event
		if json.Unmarshal(lines.Bytes(), &e) != nil || e.ObjectRef == nil {
			continue // a line cut short by a restart, or a request to no object (a discovery path)
		}
		watch := e.Verb == "watch"
		if (watch && e.Stage != auditv1.StageResponseStarted) || (!watch && e.Stage != auditv1.StageResponseComplete) {
			continue
		}
		at := e.RequestReceivedTimestamp.Time
		if at.Before(from) || !at.Before(to) {
			continue
		}
		r := request{At: at, User: e.User.Username, Verb: e.Verb, URI: e.RequestURI,
			Group: e.ObjectRef.APIGroup, Resource: e.ObjectRef.Resource, Subresource: e.ObjectRef.Subresource,
			Namespace: e.ObjectRef.Namespace, Name: e.ObjectRef.Name}
		if e.ImpersonatedUser != nil {
			r.User = e.ImpersonatedUser.Username
		}
		if e.ResponseStatus != nil {
			r.Code = e.ResponseStatus.Code
		}
		out = append(out, r)
	}
	Expect(lines.Err()).NotTo(HaveOccurred())
	slices.SortStableFunc(out, func(a, b request) int { return a.At.Compare(b.At) })
	return out
}

// meshWrites are the writes of user among requests that changed something the mesh keeps
// (everything but its Leases, whose renewals are the election's heartbeat, and Events, which
// report rather than keep state). Refused writes (a conflict, a denial) count: each is a request
// the API server had to answer.
func meshWrites(requests []request, user string) []request {
	var out []request
	for _, r := range requests {
		if r.User == user && r.IsWrite() && r.Resource != "leases" && r.Resource != "events" {
			out = append(out, r)
		}
	}
	return out
}

// relists are the relists of user among requests, by resource.
func relists(requests []request, user string) map[string]int {
	out := map[string]int{}
	for _, r := range requests {
		if r.User == user && r.IsRelist() {
			out[r.Resource]++
		}
	}
	return out
}

// touching are the requests among requests made to one of objects ("<namespace>/<name>").
func touching(requests []request, objects map[string]bool) []request {
	var out []request
	for _, r := range requests {
		if objects[r.Namespace+"/"+r.Name] {
			out = append(out, r)
		}
	}
	return out
}

// countByVerb is "<verb> <resource>: n" per kind of write, for a report.
func countByVerb(requests []request) map[string]int {
	out := map[string]int{}
	for _, r := range requests {
		resource := r.Resource
		if r.Subresource != "" {
			resource += "/" + r.Subresource
		}
		out[r.Verb+" "+resource]++
	}
	return out
}

// lines is requests one per line, for a failure message.
func lines(requests []request) string {
	out := make([]string, len(requests))
	for i, r := range requests {
		out[i] = "  " + r.String()
	}
	return strings.Join(out, "\n")
}
