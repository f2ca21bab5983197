package core

import (
	"errors"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"
)

// fakeTimer fires when the test says so, and counts its resets.
type fakeTimer struct {
	c      chan time.Time
	resets int
}

func (f *fakeTimer) Reset(time.Duration) { f.resets++ }
func (f *fakeTimer) C() <-chan time.Time { return f.c }

// An editor's save (a file written beside, renamed over the rule file, its
// mode set) restarts the wait at each step and makes one reload; swap
// files and other files restart nothing.
func TestDebounce_oneReloadPerSave(t *testing.T) {
	events := make(chan fsnotify.Event) // unbuffered: a send returns once debounce has it
	errs := make(chan error)
	stop := make(chan struct{})
	done := make(chan struct{})
	timer := &fakeTimer{c: make(chan time.Time)}
	reloads := make(chan struct{}, 10)
	var warned []error
	go func() {
		defer close(done)
		debounce(events, errs, stop, nil, timer, relevant, func() { reloads <- struct{}{} }, func(err error) { warned = append(warned, err) })
	}()
	for _, ev := range []fsnotify.Event{
		{Name: "/p/rules/.greet.toml.swp", Op: fsnotify.Create}, // an editor's own file: nothing
		{Name: "/p/rules/greet.toml.tmp", Op: fsnotify.Write},   // nor a file that is no rule
		{Name: "/p/rules/greet.toml", Op: fsnotify.Create},      // the rename over the rule file
		{Name: "/p/rules/greet.toml", Op: fsnotify.Write},
		{Name: "/p/rules/greet.toml", Op: fsnotify.Chmod},
		{Name: "/p/scripts/check.lua", Op: fsnotify.Write},
		{Name: "/p/plugins/new", Op: fsnotify.Create}, // a folder: perhaps a plugin
	} {
		events <- ev
	}
	errs <- errors.New("queue overflow")
	if timer.resets != 5 {
		t.Fatalf("the wait was restarted %d times, want 5", timer.resets)
	}
	if len(reloads) != 0 {
		t.Fatal("a change reloaded before the wait was over")
	}
	timer.c <- time.Now()
	<-reloads                                                            // the one reload
	events <- fsnotify.Event{Name: "/p/rules/x.txt", Op: fsnotify.Write} // debounce is waiting again
	if len(reloads) != 0 || timer.resets != 5 {
		t.Fatalf("%d more reloads, %d resets after the save", len(reloads), timer.resets)
	}
	close(stop)
	<-done
	if len(warned) != 1 {
		t.Fatalf("warnings: %v", warned)
	}
}
