// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/aether-mesh/aether-operator/internal/portspec"
)

// podSpecs remembers what each of the node's pods' annotations say (portspec.Parse, the one
// parser), by the pod's UID and resourceVersion: a rebuild reads each meshed pod's annotations
// three times (its proxy's upstreams and excluded ports, its UDS socket, its capture), and a pod
// declaring a thousand upstreams spent 5 % of an agent's CPU in bench-latency parsing them again
// at every rebuild. Annotations change only with the resourceVersion. Safe for concurrent use
// (the CNI hand-over programs capture outside the rebuild loop); a nil *podSpecs parses each time.
type podSpecs struct {
	mu    sync.Mutex
	byUID map[types.UID]parsedSpec
}

// parsedSpec is one pod's annotations as parsed at one resourceVersion.
type parsedSpec struct {
	version string
	spec    portspec.Spec
	err     error
}

func newPodSpecs() *podSpecs { return &podSpecs{byUID: map[types.UID]parsedSpec{}} }

// parse is portspec.Parse(pod.Annotations), remembered. The Spec is shared between callers, who
// must not modify it. A pod with no UID or resourceVersion (not read from the API server) is
// parsed each time.
func (s *podSpecs) parse(pod *corev1.Pod) (portspec.Spec, error) {
	if s == nil || pod.UID == "" || pod.ResourceVersion == "" {
		return portspec.Parse(pod.Annotations)
	}
	s.mu.Lock()
	got, ok := s.byUID[pod.UID]
	s.mu.Unlock()
	if ok && got.version == pod.ResourceVersion {
		return got.spec, got.err
	}
	spec, err := portspec.Parse(pod.Annotations)
	s.mu.Lock()
	s.byUID[pod.UID] = parsedSpec{version: pod.ResourceVersion, spec: spec, err: err}
	s.mu.Unlock()
	return spec, err
}

// keep forgets every pod but those of keep: the node's pods at a rebuild.
func (s *podSpecs) keep(keep map[types.UID]bool) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for uid := range s.byUID {
		if !keep[uid] {
			delete(s.byUID, uid)
		}
	}
}
