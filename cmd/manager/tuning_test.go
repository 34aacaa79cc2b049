// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"flag"
	"strings"
	"testing"
)

// TestTuningFlags parses the tuning flags as the manager does and checks them: the defaults and
// sensible values pass; each impossible value is refused with the flag, the value and the fix.
func TestTuningFlags(t *testing.T) {
	cases := map[string]struct {
		args []string
		want string // "" when accepted, else a part of the error
	}{
		"defaults":                {},
		"tuned":                   {args: []string{"--max-concurrent-reconciles=8", "--kube-api-qps=50", "--kube-api-burst=100", "--batch-window=500ms"}},
		"no batching":             {args: []string{"--batch-window=0"}},
		"pprof on loopback":       {args: []string{"--pprof-bind-address=127.0.0.1:8082"}},
		"pprof on IPv6 loopback":  {args: []string{"--pprof-bind-address=[::1]:8082"}},
		"pprof on localhost":      {args: []string{"--pprof-bind-address=localhost:8082"}},
		"no worker":               {args: []string{"--max-concurrent-reconciles=0"}, want: "--max-concurrent-reconciles=0"},
		"limited without a burst": {args: []string{"--kube-api-qps=20", "--kube-api-burst=0"}, want: "--kube-api-burst=0 with --kube-api-qps=20"},
		"negative window":         {args: []string{"--batch-window=-1s"}, want: "--batch-window=-1s"},
		"window over a minute":    {args: []string{"--batch-window=2m"}, want: "--batch-window=2m0s"},
		"pprof on every address":  {args: []string{"--pprof-bind-address=:8082"}, want: "loopback only"},
		"pprof on a public IP":    {args: []string{"--pprof-bind-address=10.0.0.1:8082"}, want: "loopback only"},
		"pprof without a port":    {args: []string{"--pprof-bind-address=127.0.0.1"}, want: "give a loopback host and port"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			fs := flag.NewFlagSet("manager", flag.ContinueOnError)
			var knobs tuning
			knobs.bindFlags(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			err := knobs.check()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && err == nil:
				t.Errorf("accepted, want an error naming %q", tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Errorf("error %q does not name %q", err, tc.want)
			}
		})
	}
}
