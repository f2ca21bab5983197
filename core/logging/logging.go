// Package logging is Clara's leveled log with a replaceable sink.
//
// The level check is one atomic load, so disabled logging costs nothing on
// the hot path. A Logger is safe for concurrent use: Log may run on any
// goroutine, and SetSink waits for calls of the old sink to finish, so that
// once SetSink returns the old sink is never called again (a C host may free
// what its handler used).
package logging

import (
	"fmt"
	"io"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Level orders messages. The values are part of the C ABI (CLARA_LOG_* in
// clara.h): never renumber.
type Level int32

const (
	Debug Level = 0
	Info  Level = 1
	Warn  Level = 2
	Error Level = 3
	// Off is above every level: a sink with this minimum receives nothing.
	Off Level = 4
)

func (l Level) String() string {
	switch l {
	case Debug:
		return "debug"
	case Info:
		return "info"
	case Warn:
		return "warn"
	case Error:
		return "error"
	}
	return "off"
}

// ParseLevel reads the names accepted by CLARA_LOG: debug, info, warn (or
// warning), error, off.
func ParseLevel(s string) (Level, bool) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "debug":
		return Debug, true
	case "info":
		return Info, true
	case "warn", "warning":
		return Warn, true
	case "error":
		return Error, true
	case "off", "none":
		return Off, true
	}
	return Off, false
}

// MessageLevel is the level of one message named by a subsystem that
// speaks in level names (Lua's log, the callbacks): a name ParseLevel does
// not know, or "off", which no message can have, is Info.
func MessageLevel(name string) Level {
	if l, ok := ParseLevel(name); ok && l != Off {
		return l
	}
	return Info
}

// Sink receives messages at or above the Logger's minimum level.
type Sink func(level Level, message string)

// Logger is a leveled log. The zero value discards everything.
type Logger struct {
	// threshold is the minimum level plus one, so that the zero value (0)
	// means "nothing is enabled" rather than "debug and up": the lowest of
	// the sink's and the taps'.
	threshold atomic.Int32
	mu        sync.RWMutex // held for reading while a sink or a tap runs
	sink      Sink
	sinkMin   Level
	taps      []*tap // copy on write, under mu
	filter    atomic.Pointer[func(string) string]
	format    atomic.Int32 // Format
}

// tap is a receiver of messages besides the sink (AddTap).
type tap struct {
	min Level
	f   Sink
}

// SetFilter makes every message pass through f before it reaches a sink
// (the engine cuts secrets out this way); nil removes it. f must be safe
// for concurrent use.
func (l *Logger) SetFilter(f func(string) string) {
	if f == nil {
		l.filter.Store(nil)
		return
	}
	l.filter.Store(&f)
}

// New returns a Logger sending messages at min or above to sink.
func New(sink Sink, min Level) *Logger {
	l := &Logger{}
	l.SetSink(sink, min)
	return l
}

// SetSink replaces the sink and the minimum level. A nil sink discards
// everything. It returns once no call of the previous sink is running.
func (l *Logger) SetSink(sink Sink, min Level) {
	if sink == nil {
		min = Off
	}
	l.mu.Lock()
	l.sink, l.sinkMin = sink, min
	l.setThresholdLocked()
	l.mu.Unlock()
}

func (l *Logger) setThresholdLocked() {
	min := l.sinkMin
	if l.sink == nil {
		min = Off
	}
	for _, t := range l.taps {
		if t.min < min {
			min = t.min
		}
	}
	l.threshold.Store(int32(min) + 1)
}

// AddTap sends messages at min and above to f as well as to the sink
// (an MCP client that set a level receives Clara's log this way). f runs
// on the goroutine that logs, under the same guarantee as a sink: once
// the returned remove returns, f is not running and is not called again.
// f must not block and must not log.
func (l *Logger) AddTap(min Level, f Sink) (remove func()) {
	t := &tap{min: min, f: f}
	l.mu.Lock()
	l.taps = append(append([]*tap(nil), l.taps...), t)
	l.setThresholdLocked()
	l.mu.Unlock()
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		var kept []*tap
		for _, x := range l.taps {
			if x != t {
				kept = append(kept, x)
			}
		}
		l.taps = kept
		l.setThresholdLocked()
	}
}

// Enabled reports whether a message at level would reach the sink.
func (l *Logger) Enabled(level Level) bool {
	if l == nil {
		return false
	}
	t := l.threshold.Load()
	return t != 0 && int32(level)+1 >= t
}

// Log sends message at level to the sink, if enabled (rendered as
// {"msg": message} in JSON format).
func (l *Logger) Log(level Level, message string) {
	if !l.Enabled(level) {
		return
	}
	if l.Format() == FormatJSON {
		message = l.render(message, nil)
	}
	l.emit(level, message)
}

// emit sends a rendered message to the sink and the taps.
func (l *Logger) emit(level Level, message string) {
	if f := l.filter.Load(); f != nil {
		message = (*f)(message)
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.sink != nil && level >= l.sinkMin {
		l.sink(level, message)
	}
	for _, t := range l.taps {
		if level >= t.min {
			t.f(level, message)
		}
	}
}

// Logf formats and logs; the arguments are not formatted when the level is
// disabled.
func (l *Logger) Logf(level Level, format string, args ...any) {
	if l.Enabled(level) {
		l.Log(level, fmt.Sprintf(format, args...))
	}
}

// TimeFormat is the time of a log line: UTC, to the microsecond.
const TimeFormat = "2006-01-02T15:04:05.000000Z07:00"

// WriterSink writes one line per message to w, serialised so that lines
// never interleave: "2026-01-02T15:04:05.123456Z clara warn: message"
// for a text message, and for a JSON one (log.format = "json") the
// message's object with "time" and "level" put first.
func WriterSink(w io.Writer) Sink {
	var mu sync.Mutex
	return func(level Level, message string) {
		now := time.Now().UTC().Format(TimeFormat)
		var line string
		if isJSONMessage(message) {
			line = `{"time":"` + now + `","level":"` + level.String() + `",` + message[1:] + "\n"
		} else {
			line = now + " clara " + level.String() + ": " + message + "\n"
		}
		mu.Lock()
		_, _ = io.WriteString(w, line)
		mu.Unlock()
	}
}

// Panic logs a recovered panic at error level with the stack of the
// goroutine that panicked (call it from the deferred function that
// recovered): every guard of Clara reports panics this one way.
func Panic(l *Logger, where string, value any) {
	l.Logf(Error, "panic in %s: %v\n%s", where, value, debug.Stack())
}
