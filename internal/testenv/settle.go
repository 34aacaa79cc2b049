// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package testenv

import (
	"fmt"
	"testing"
)

// Settle waits until controller has reconciled at least atLeast times in all and has nothing
// left to do: every request its queue took in (workqueue_adds_total) has been reconciled
// (controller_runtime_reconcile_total), at two reads 100 ms apart with nothing new in between (an
// event handler's add reaches the queue's counter a moment after the handler returns). A check
// after it that nothing was written is a check of what those reconciles did, not of how fast they
// ran. A request requeued after a delay is not counted until it is due: the reconcilers here
// requeue that way only after a race with another writer.
func Settle(t testing.TB, controller string, atLeast float64) {
	t.Helper()
	var last [2]float64
	idleOnce := false
	Eventually(t, fmt.Sprintf("%s reconciled %v times and idle", controller, atLeast), func() error {
		done, err := Counter("controller_runtime_reconcile_total", "controller", controller)
		if err != nil {
			return err
		}
		taken, err := Counter("workqueue_adds_total", "controller", controller)
		if err != nil {
			return err
		}
		now := [2]float64{done, taken}
		wasIdle := idleOnce && now == last
		idleOnce, last = done >= atLeast && taken == done, now
		switch {
		case done < atLeast:
			return fmt.Errorf("%v reconciles so far", done)
		case taken != done:
			return fmt.Errorf("%v requests taken in, %v reconciled", taken, done)
		case !wasIdle:
			return fmt.Errorf("idle at %v reconciles; reading again", done)
		}
		return nil
	})
}
