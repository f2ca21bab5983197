package main

import (
	"sync"
	"testing"
)

// A call whose slot is taken (by an abandoned call still running) goes to
// the map, and both are found, each by its own id, until deleted.
func TestCallTable_slotTaken(t *testing.T) {
	var tab callTable
	n := uintptr(len(tab.slots))
	stuck, next, other := new(toolCall), new(toolCall), new(toolCall)
	tab.store(5, stuck)
	tab.store(5+n, next) // the same slot
	tab.store(6, other)
	if tab.nmore.Load() != 1 {
		t.Fatalf("%d calls in the map, want 1", tab.nmore.Load())
	}
	for id, want := range map[uintptr]*toolCall{5: stuck, 5 + n: next, 6: other, 7: nil, 5 + 2*n: nil} {
		if got := tab.load(id); got != want {
			t.Errorf("load(%d) = %p, want %p", id, got, want)
		}
	}
	tab.delete(5+n, next)
	if tab.load(5+n) != nil || tab.nmore.Load() != 0 || tab.load(5) != stuck {
		t.Fatalf("after deleting %d: load = %p, %d in the map, load(5) = %p", 5+n, tab.load(5+n), tab.nmore.Load(), tab.load(5))
	}
	if got := tab.loadAndDelete(5); got != stuck || tab.load(5) != nil {
		t.Fatalf("loadAndDelete(5) = %p, then load(5) = %p", got, tab.load(5))
	}
	tab.store(5+2*n, next) // the slot is free again
	if tab.nmore.Load() != 0 || tab.load(5+2*n) != next {
		t.Fatalf("a free slot was not taken")
	}
}

// Calls from several goroutines, some left running (abandoned) for a
// while, each toolCall reused for the next id: every lookup of a live call
// finds its own (go test -race checks the rest).
func TestCallTable_concurrent(t *testing.T) {
	var tab callTable
	var next sync.Mutex
	id := uintptr(0)
	newID := func() uintptr { next.Lock(); defer next.Unlock(); id++; return id }
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			tc := new(toolCall)
			var abandoned []struct {
				id uintptr
				tc *toolCall
			}
			for i := 0; i < 20000; i++ {
				id := newID()
				tab.store(id, tc)
				if got := tab.load(id); got != tc {
					t.Errorf("load(%d) = %p, want %p", id, got, tc)
					return
				}
				if i%97 == g {
					abandoned = append(abandoned, struct {
						id uintptr
						tc *toolCall
					}{id, tc})
					tc = new(toolCall)
					continue
				}
				tab.delete(id, tc)
				if len(abandoned) > 3 {
					a := abandoned[0]
					abandoned = abandoned[1:]
					if got := tab.loadAndDelete(a.id); got != a.tc {
						t.Errorf("loadAndDelete(%d) = %p, want %p", a.id, got, a.tc)
						return
					}
				}
			}
			for _, a := range abandoned {
				tab.delete(a.id, a.tc)
			}
		}(g)
	}
	wg.Wait()
	if tab.nmore.Load() != 0 {
		t.Errorf("%d calls left in the map", tab.nmore.Load())
	}
	for i := range tab.slots {
		if tab.slots[i].tc.Load() != nil {
			t.Errorf("slot %d still taken", i)
		}
	}
}
