// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package meshdns

import (
	"fmt"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// nsThread is one OS thread that entered a network namespace for good: what runs on it opens its
// sockets there, and a socket keeps its namespace after, whichever thread uses it. The thread is
// never handed back to the scheduler: it exits with its goroutine (close).
type nsThread struct {
	work chan func()
}

// enterNS starts a thread in the network namespace at path (setns(2): CAP_SYS_ADMIN).
func enterNS(path string) (*nsThread, error) {
	t := &nsThread{work: make(chan func())}
	ready := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread goes when this goroutine returns
		f, err := os.Open(path)
		if err == nil {
			err = unix.Setns(int(f.Fd()), unix.CLONE_NEWNET)
			f.Close()
		}
		if err != nil {
			ready <- fmt.Errorf("entering the network namespace %s: %w", path, err)
			return
		}
		ready <- nil
		for f := range t.work {
			f()
		}
	}()
	if err := <-ready; err != nil {
		return nil, err
	}
	return t, nil
}

// do runs f on the thread, in its namespace, and returns when f has.
func (t *nsThread) do(f func()) {
	done := make(chan struct{})
	t.work <- func() { f(); close(done) }
	<-done
}

// close ends the thread (after the work already handed over).
func (t *nsThread) close() { close(t.work) }
