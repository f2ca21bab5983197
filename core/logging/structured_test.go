package logging_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clara-lib/clara/core/logging"
)

// TestWriterSink_subSecond: a line's time has microseconds.
func TestWriterSink_subSecond(t *testing.T) {
	var b bytes.Buffer
	l := logging.New(logging.WriterSink(&b), logging.Debug)
	l.Log(logging.Info, "hello")
	if !regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z clara info: hello\n$`).MatchString(b.String()) {
		t.Fatalf("%q", b.String())
	}
}

// TestLogAttrs_text_and_json: attributes as key=value pairs, or one JSON
// object per line with time and level first; a secret the filter knows is
// cut out of both.
func TestLogAttrs_text_and_json(t *testing.T) {
	var b bytes.Buffer
	l := logging.New(logging.WriterSink(&b), logging.Debug)
	l.SetFilter(func(s string) string { return strings.ReplaceAll(s, "s3cret", "[redacted]") })
	attrs := []slog.Attr{slog.String("tool", "echo"), slog.String("session", "a b"), slog.Duration("duration", 1500*time.Microsecond),
		slog.String("decision_id", "0a0b0c0d-0-1"), slog.String("note", "s3cret")}
	l.LogAttrs(logging.Warn, "call done", attrs...)
	line := b.String()
	if !strings.HasSuffix(line, ` clara warn: call done tool=echo session="a b" duration=1.5ms decision_id=0a0b0c0d-0-1 note=[redacted]`+"\n") {
		t.Fatalf("text: %q", line)
	}
	b.Reset()
	l.SetFormat(logging.ParseFormat("json"))
	l.LogAttrs(logging.Warn, "call done", attrs...)
	l.Logf(logging.Info, "plain %d", 7)
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%q", b.String())
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &m); err != nil {
		t.Fatalf("%v: %s", err, lines[0])
	}
	if !strings.HasPrefix(lines[0], `{"time":"`) || m["level"] != "warn" || m["msg"] != "call done" || m["tool"] != "echo" ||
		m["duration"] != 1.5 || m["note"] != "[redacted]" || !regexp.MustCompile(`\.\d{6}Z$`).MatchString(m["time"].(string)) {
		t.Fatalf("json: %s", lines[0])
	}
	if err := json.Unmarshal([]byte(lines[1]), &m); err != nil || m["msg"] != "plain 7" || m["level"] != "info" {
		t.Fatalf("json Logf: %s", lines[1])
	}
}

// TestSlog: a log/slog Logger writes through the same sink, at the
// nearest level, with groups as dotted keys.
func TestSlog(t *testing.T) {
	var got []string
	l := logging.New(func(level logging.Level, m string) { got = append(got, level.String()+" "+m) }, logging.Info)
	s := l.Slog().With("tool", "t1").WithGroup("call")
	s.Debug("dropped")
	s.Info("ran", "ms", 3)
	s.Error("failed", "code", "denied")
	want := []string{"info ran tool=t1 call.ms=3", "error failed tool=t1 call.code=denied"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("%q", got)
	}
}

// TestAddTap: a tap gets messages at its own level, below the sink's; once
// removed it is never called again, and the level check is back to the
// sink's.
func TestAddTap(t *testing.T) {
	var mu sync.Mutex
	var sink, tap []string
	l := logging.New(func(_ logging.Level, m string) { mu.Lock(); sink = append(sink, m); mu.Unlock() }, logging.Error)
	if l.Enabled(logging.Debug) {
		t.Fatal("debug enabled before the tap")
	}
	remove := l.AddTap(logging.Debug, func(_ logging.Level, m string) { mu.Lock(); tap = append(tap, m); mu.Unlock() })
	l.Log(logging.Debug, "d")
	l.Log(logging.Error, "e")
	remove()
	l.Log(logging.Debug, "after")
	if strings.Join(sink, ",") != "e" || strings.Join(tap, ",") != "d,e" || l.Enabled(logging.Debug) {
		t.Fatalf("sink %q tap %q", sink, tap)
	}
}
