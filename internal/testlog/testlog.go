// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Package testlog is test support: a logr.Logger whose lines a test reads back. It holds nothing
// of the project's and imports only logr.
package testlog

import (
	"slices"
	"strings"
	"sync"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
)

// Lines collects the lines of the loggers it makes; safe from any goroutine.
type Lines struct {
	mu    sync.Mutex
	lines []string
}

// Logger is a logger (funcr's format, up to verbosity) whose lines l collects.
func (l *Lines) Logger(verbosity int) logr.Logger {
	return funcr.New(l.write, funcr.Options{Verbosity: verbosity})
}

func (l *Lines) write(prefix, args string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, prefix+" "+args)
}

// With are the lines that contain every one of parts.
func (l *Lines) With(parts ...string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range l.lines {
		if !slices.ContainsFunc(parts, func(p string) bool { return !strings.Contains(line, p) }) {
			out = append(out, line)
		}
	}
	return out
}
