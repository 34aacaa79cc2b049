// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package plugin

import (
	"fmt"
	"strings"
	"testing"

	"github.com/aether-mesh/aether-operator/internal/golden"
)

const dialData = "testdata/dial"

// dialCases are the spellings of the issue, each against the fixture: args after `dial`, and the
// exit status scripts rely on.
var dialCases = map[string]struct {
	args []string
	exit int
}{
	"http-portless-421":    {[]string{"http://payments.shop.aether.internal/"}, ExitFound},
	"http-port":            {[]string{"http://payments.shop:8080/checkout"}, 0},
	"http-port-tcp-421":    {[]string{"http://payments.shop:9000/"}, ExitFound},
	"http-portless-web":    {[]string{"http://web.shop/"}, 0},
	"tcp-conflict":         {[]string{"payments.shop:9000"}, 0},
	"svc-cluster-local":    {[]string{"payments.shop.svc.cluster.local:18082"}, 0},
	"https-refused":        {[]string{"https://payments.shop/"}, ExitFound},
	"https-web":            {[]string{"https://web.shop/"}, 0},
	"current-namespace":    {[]string{"payments:8080", "-n", "shop"}, 0},
	"proxy-port":           {[]string{"payments.shop:18081"}, 0},
	"host-header":          {[]string{"--host", "payments.shop:9090"}, 0},
	"host-header-not-http": {[]string{"payments.shop:18081", "--host", "payments.shop:9000"}, ExitFound},
	"host-header-400":      {[]string{"--host", "payments.shop:080"}, ExitFound},
	"undeclared-refused":   {[]string{"payments.shop:7000"}, ExitFound},
	"udp-to-tcp-port":      {[]string{"payments.shop:9000/udp"}, ExitFound},
	"udp-mesh-port":        {[]string{"payments.shop:18082/udp"}, ExitFound},
	"udp-from":             {[]string{"payments.shop:18082/udp", "--from", "shop/client"}, ExitFound},
	"no-such-service":      {[]string{"ledger.shop:80"}, ExitFound},
	"no-port":              {[]string{"payments.shop"}, ExitUsage},
	"host-wrong-port":      {[]string{"payments.shop:8080", "--host", "payments.shop:8080"}, ExitUsage},
	"not-a-name":           {[]string{"a.b.c:80"}, ExitUsage},
	"json":                 {[]string{"payments.shop:9000", "-o", "json"}, 0},
	"yaml-421":             {[]string{"http://payments.shop/", "-o", "yaml"}, ExitFound},

	// --from: the same dials from pods whose capture differs (from_test.go's fixture).
	"from-surface":          {[]string{"payments.shop:9000", "--from", "client", "-n", "shop"}, 0},
	"from-scoped":           {[]string{"payments.shop:9000", "--from", "shop/client-scoped"}, ExitFound},
	"from-scoped-mesh-port": {[]string{"payments.shop:18082", "--from", "shop/client-scoped"}, 0},
	"from-scoped-http":      {[]string{"http://payments.shop:8080/", "--from", "shop/client-scoped"}, ExitFound},
	"from-surface-http":     {[]string{"http://payments.shop:8080/", "--from", "shop/client"}, ExitFound},
	// AccessPolicy payments-http: 8080 admits ServiceAccount client (every client pod's) under /checkout only.
	"from-access-admitted":    {[]string{"http://payments.shop:8080/checkout/7", "--from", "shop/client"}, 0},
	"from-access-denied":      {[]string{"http://payments.shop:8080/admin", "--from", "shop/client"}, ExitFound},
	"from-access-open-port":   {[]string{"payments.shop:9000", "--from", "shop/client-b"}, 0},
	"from-access-json":        {[]string{"http://payments.shop:8080/checkout", "--from", "shop/client", "-o", "json"}, 0},
	"from-excluded":           {[]string{"payments.shop:9000", "--from", "shop/client-excluded"}, ExitFound},
	"from-bad-mode":           {[]string{"payments.shop:9000", "--from", "shop/client-bad-mode"}, 0},
	"from-surface-undeclared": {[]string{"payments.shop:7000", "--from", "shop/client"}, ExitFound},
	"from-all-undeclared":     {[]string{"payments.shop:7000", "--from", "shop/client-b"}, ExitFound},
	"from-proxy-loopback":     {[]string{"--host", "payments.shop:9090", "--from", "shop/client-scoped"}, 0},
	"from-proxy-name":         {[]string{"web.shop:18081", "--host", "payments.shop:9090", "--from", "shop/client-scoped"}, 0},
	"from-outsider":           {[]string{"payments.shop:9000", "--from", "shop/outsider"}, ExitFound},
	"from-no-such-pod":        {[]string{"payments.shop:9000", "--from", "ghost", "-n", "shop"}, ExitUsage},
	"from-json":               {[]string{"payments.shop:9000", "--from", "shop/client-scoped", "-o", "json"}, ExitFound},
}

// TestDialGolden runs kubectl aether dial against the envtest API server, through --kubeconfig,
// for every spelling the issue names: output against testdata/dial/<case>.out, exit status
// against the table.
func TestDialGolden(t *testing.T) {
	names := make([]string, 0, len(dialCases))
	for name, c := range dialCases {
		names = append(names, name)
		args := append(append([]string{"dial"}, c.args...), kubeconfig()...)
		out, code := run(t, "", args...)
		if code != c.exit {
			t.Errorf("case %s: kubectl aether dial %s: exit status %d, want %d\n%s", name, strings.Join(c.args, " "), code, c.exit, out)
		}
		got := fmt.Sprintf("$ kubectl aether dial %s\n%sexit status %d\n", strings.Join(c.args, " "), out, code)
		golden.Compare(t, dialData, name, ".out", []byte(got), *update)
	}
	golden.Orphans(t, dialData, names, ".in", ".out", *update)
}
