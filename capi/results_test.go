package main

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/clara-lib/clara/core/toolbox"
)

// A toolCall's shim_result goes back to C's free list when Go collects the
// toolCall, and the next toolCalls take those slots rather than new ones.
func TestToolCallResults_goBackWhenCollected(t *testing.T) {
	const n = 100
	take := func() {
		for i := 0; i < n; i++ {
			if newToolCall(context.Background(), toolbox.Call{}, uintptr(i+1)) == nil {
				t.Fatal("newToolCall: no memory")
			}
		}
	}
	before, _ := shimResults()
	take() // dropped, never recycled: only the collector gives them back
	if out, _ := shimResults(); out < before+n {
		t.Fatalf("%d shim_results out after taking %d, %d before", out, n, before)
	}
	waitBack := func() {
		for deadline := time.Now().Add(20 * time.Second); ; {
			runtime.GC()
			if out, _ := shimResults(); out <= before {
				return
			}
			if time.Now().After(deadline) {
				out, _ := shimResults()
				t.Fatalf("%d shim_results still out after collecting, %d before", out, before)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitBack()
	_, made := shimResults()
	take()
	if _, again := shimResults(); again != made {
		t.Fatalf("C made %d shim_results, then %d more for toolCalls that could reuse them", made, again-made)
	}
	waitBack()
}
