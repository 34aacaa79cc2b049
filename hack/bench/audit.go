// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/aether-mesh/aether-operator/internal/testenv"
)

// managerUser is the user the manager binary speaks as (a client certificate of its own), bound
// to config/rbac's manager-role: the audit log tells its requests from everyone else's.
const managerUser = "aether-manager"

// agentProcessUser is the user the agent binary's kubeconfig holds (a client certificate of its
// own, in system:masters only to impersonate): it speaks as the node agent of its node
// (testenv.AgentUser with the node's claim, under the agent's role and the node-authority
// policy), and the audit log, which matches the authenticated user, logs its every request.
const agentProcessUser = "aether-bench-agent"

// auditPolicy logs, at Metadata level (who, verb, resource, response code; no bodies), every
// request of the manager, and every write to the mesh's objects and Services by anyone: the
// manager's requests are counted, and nobody else's writes to what it owns go unseen.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  users: ["` + managerUser + `", "` + agentProcessUser + `"]
- level: Metadata
  verbs: [create, update, patch, delete, deletecollection]
  resources:
  - group: mesh.aether.io
  - group: ""
    resources: [services]
- level: None
`

// auditEvent is what the benchmark reads of one audit event.
type auditEvent struct {
	Stage            string                     `json:"stage"`
	Verb             string                     `json:"verb"`
	User             struct{ Username string }  `json:"user"`
	ImpersonatedUser *struct{ Username string } `json:"impersonatedUser"`
	ObjectRef        *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	RequestReceivedTimestamp time.Time `json:"requestReceivedTimestamp"`
}

// Who made a request, when it is one of the writers the benchmark tells apart: the manager, the
// benchmark's agent writers, and the one real agent process.
const (
	byManager      = "manager"
	byAgent        = "agent"
	byAgentProcess = "agent-process"
)

// request is one finished API request.
type request struct {
	at       time.Time
	who      string // byManager, byAgent, or the user's name
	verb     string
	resource string // resource or resource/subresource
	object   string // namespace/name
	code     int
}

// write reports whether the request asked to change something.
func (q request) write() bool {
	return slices.Contains([]string{"create", "update", "patch", "delete", "deletecollection"}, q.verb)
}

// readAudit reads the requests the audit log holds, each once (its ResponseComplete event).
func readAudit(path string) ([]request, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	var out []request
	scanner := bufio.NewScanner(f)
	scanner.Buffer(make([]byte, 1<<20), 16<<20)
	for scanner.Scan() {
		var ev auditEvent
		if err := json.Unmarshal(scanner.Bytes(), &ev); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if q, ok := requestOf(ev); ok {
			out = append(out, q)
		}
	}
	return out, scanner.Err()
}

// requestOf reduces a finished request's event; other stages are not requests.
func requestOf(ev auditEvent) (request, bool) {
	if ev.Stage != "ResponseComplete" {
		return request{}, false
	}
	q := request{at: ev.RequestReceivedTimestamp, verb: ev.Verb, who: ev.User.Username}
	switch {
	case ev.User.Username == managerUser:
		q.who = byManager
	case ev.User.Username == agentProcessUser:
		q.who = byAgentProcess
	case ev.ImpersonatedUser != nil && ev.ImpersonatedUser.Username == testenv.AgentUser:
		q.who = byAgent
	case ev.ImpersonatedUser != nil:
		q.who = ev.ImpersonatedUser.Username
	}
	if ev.ObjectRef != nil {
		q.resource = ev.ObjectRef.Resource
		q.object = ev.ObjectRef.Namespace + "/" + ev.ObjectRef.Name
		if ev.ObjectRef.Subresource != "" {
			q.resource += "/" + ev.ObjectRef.Subresource
		}
	}
	if ev.ResponseStatus != nil {
		q.code = ev.ResponseStatus.Code
	}
	return q, true
}

// window is the requests received in [from, to).
func window(all []request, from, to time.Time) []request {
	var out []request
	for _, q := range all {
		if !q.at.Before(from) && q.at.Before(to) {
			out = append(out, q)
		}
	}
	return out
}

// tally counts requests by "verb resource code".
type tally map[string]int

func (t tally) total() int {
	n := 0
	for _, v := range t {
		n += v
	}
	return n
}

// writesOf counts who's writes, by "verb resource code".
func writesOf(reqs []request, who string) tally {
	out := tally{}
	for _, q := range reqs {
		if q.who == who && q.write() {
			out[fmt.Sprintf("%s %s %d", q.verb, q.resource, q.code)]++
		}
	}
	return out
}

// readsOf counts who's reads, by "verb resource".
func readsOf(reqs []request, who string) tally {
	out := tally{}
	for _, q := range reqs {
		if q.who == who && !q.write() {
			out[q.verb+" "+q.resource]++
		}
	}
	return out
}

// othersWrites counts the writes to the mesh's objects and Services by anyone but the manager
// and the agents, the agent process included (the benchmark's own pods aside, which the policy does not log), by user: none
// is expected while the manager converges.
func othersWrites(reqs []request) tally {
	out := tally{}
	for _, q := range reqs {
		if q.write() && q.who != byManager && q.who != byAgent && q.who != byAgentProcess {
			out[q.who+" "+q.verb+" "+q.resource]++
		}
	}
	return out
}

// String lists a tally's entries, largest first.
func (t tally) String() string {
	keys := make([]string, 0, len(t))
	for k := range t {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if t[a] != t[b] {
			return t[b] - t[a]
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s: %d", k, t[k])
	}
	return strings.Join(parts, ", ")
}

// spreads are, for each service, the time from the first to the last of the agents' writes to its
// endpoints: how far apart a service's changes arrive, which decides what the manager's batching
// window can merge. endpointService maps an endpoint's namespace/name to its service's.
func spreads(reqs []request, endpointService func(string) string) []time.Duration {
	first, last := map[string]time.Time{}, map[string]time.Time{}
	for _, q := range reqs {
		if q.who != byAgent || !q.write() || !strings.HasPrefix(q.resource, "meshendpoints") {
			continue
		}
		svc := endpointService(q.object)
		if t, ok := first[svc]; !ok || q.at.Before(t) {
			first[svc] = q.at
		}
		if q.at.After(last[svc]) {
			last[svc] = q.at
		}
	}
	out := make([]time.Duration, 0, len(first))
	for svc, t := range first {
		out = append(out, last[svc].Sub(t))
	}
	slices.Sort(out)
	return out
}
