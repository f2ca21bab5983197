package mcp

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"

	"github.com/clara-lib/clara/core/logging"
)

// logf logs through Clara's logger. A sink that panics cannot be told so
// anywhere: its panic is dropped here rather than ending a goroutine.
func logf(l *logging.Logger, level logging.Level, format string, args ...any) {
	defer func() { _ = recover() }()
	if l.Enabled(level) {
		l.Log(level, "mcp: "+fmt.Sprintf(format, args...))
	}
}

// logPanic logs a recovered panic with its stack.
func logPanic(l *logging.Logger, where string, r any) {
	logf(l, logging.Error, "panic in %s: %v\n%s", where, r, debug.Stack())
}

// slogBridge hands the SDK's own messages to Clara's log, one level down
// (the SDK logs every session at info): info and below are debug, warnings
// stay warnings, errors (a client going away, a bad message) are warnings.
// The SDK's messages carry methods and errors, never arguments.
type slogBridge struct {
	log   *logging.Logger
	attrs string
}

func newSlog(l *logging.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(&slogBridge{log: l})
}

func bridgeLevel(l slog.Level) logging.Level {
	if l >= slog.LevelWarn {
		return logging.Warn
	}
	return logging.Debug
}

func (h *slogBridge) Enabled(_ context.Context, l slog.Level) bool {
	return h.log.Enabled(bridgeLevel(l))
}

func (h *slogBridge) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString("mcp sdk: ")
	b.WriteString(r.Message)
	b.WriteString(h.attrs)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	func() {
		defer func() { _ = recover() }()
		h.log.Log(bridgeLevel(r.Level), b.String())
	}()
	return nil
}

func (h *slogBridge) WithAttrs(as []slog.Attr) slog.Handler {
	var b strings.Builder
	b.WriteString(h.attrs)
	for _, a := range as {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
	}
	return &slogBridge{log: h.log, attrs: b.String()}
}

func (h *slogBridge) WithGroup(string) slog.Handler { return h }
