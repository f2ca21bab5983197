package logging_test

import (
	"bytes"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clara-lib/clara/core/logging"
)

func TestLogger_levels(t *testing.T) {
	var got []string
	l := logging.New(func(level logging.Level, m string) { got = append(got, level.String()+":"+m) }, logging.Warn)
	l.Log(logging.Debug, "d")
	l.Log(logging.Info, "i")
	l.Log(logging.Warn, "w")
	l.Logf(logging.Error, "e%d", 1)
	if strings.Join(got, ",") != "warn:w,error:e1" {
		t.Errorf("got %v", got)
	}
	var zero logging.Logger
	zero.Log(logging.Error, "discarded") // the zero value discards
	if zero.Enabled(logging.Debug) || zero.Enabled(logging.Error) {
		t.Error("the zero Logger reports a level enabled")
	}
	var nilLogger *logging.Logger
	if nilLogger.Enabled(logging.Error) {
		t.Error("a nil logger is enabled")
	}
}

func TestParseLevel(t *testing.T) {
	for in, want := range map[string]logging.Level{"debug": logging.Debug, " INFO ": logging.Info, "warning": logging.Warn, "error": logging.Error, "off": logging.Off} {
		if got, ok := logging.ParseLevel(in); !ok || got != want {
			t.Errorf("ParseLevel(%q) = %v, %v", in, got, ok)
		}
	}
	if _, ok := logging.ParseLevel("loud"); ok {
		t.Error("ParseLevel accepted loud")
	}
}

// TestSetSink_waitsForRunningSink: once SetSink returns, the old sink is
// not running and is never called again.
func TestSetSink_waitsForRunningSink(t *testing.T) {
	var running, after atomic.Int32
	var replaced atomic.Bool
	entered := make(chan struct{}, 1)
	slow := func(logging.Level, string) {
		running.Add(1)
		if replaced.Load() {
			after.Add(1)
		}
		select {
		case entered <- struct{}{}:
		default:
		}
		time.Sleep(20 * time.Millisecond)
		running.Add(-1)
	}
	l := logging.New(slow, logging.Debug)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); l.Log(logging.Info, "x") }()
	<-entered
	l.SetSink(func(logging.Level, string) {}, logging.Debug)
	replaced.Store(true)
	if running.Load() != 0 {
		t.Error("SetSink returned while the old sink was running")
	}
	l.Log(logging.Info, "y")
	wg.Wait()
	if after.Load() != 0 {
		t.Error("old sink called after SetSink returned")
	}
}

func TestWriterSink(t *testing.T) {
	var b bytes.Buffer
	logging.WriterSink(&b)(logging.Warn, "careful")
	if !strings.HasSuffix(b.String(), " clara warn: careful\n") {
		t.Errorf("line %q", b.String())
	}
}

func TestMessageLevel(t *testing.T) {
	for name, want := range map[string]logging.Level{"debug": logging.Debug, "WARN": logging.Warn, "error": logging.Error,
		"info": logging.Info, "off": logging.Info, "loud": logging.Info, "": logging.Info} {
		if got := logging.MessageLevel(name); got != want {
			t.Errorf("MessageLevel(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestLogger_filter(t *testing.T) {
	var got []string
	l := logging.New(func(_ logging.Level, m string) { got = append(got, m) }, logging.Debug)
	l.SetFilter(func(s string) string { return strings.ReplaceAll(s, "secret", "[redacted]") })
	l.Logf(logging.Info, "the %s is out", "secret")
	l.SetFilter(nil)
	l.Log(logging.Info, "secret")
	if strings.Join(got, ",") != "the [redacted] is out,secret" {
		t.Errorf("got %q", got)
	}
}
