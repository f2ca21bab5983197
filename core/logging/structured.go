package logging

import (
	"context"
	"encoding/json"
	"log/slog"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Format is how a message and its attributes are rendered (log.format).
type Format int32

const (
	// FormatText: the message, then key=value pairs (values with spaces,
	// quotes or '=' quoted).
	FormatText Format = 0
	// FormatJSON: one JSON object, {"msg": ..., key: value, ...}; the
	// stderr sink puts "time" and "level" first.
	FormatJSON Format = 1
)

// ParseFormat reads log.format: "json", else text.
func ParseFormat(s string) Format {
	if strings.EqualFold(strings.TrimSpace(s), "json") {
		return FormatJSON
	}
	return FormatText
}

// SetFormat sets how messages are rendered from now on.
func (l *Logger) SetFormat(f Format) { l.format.Store(int32(f)) }

// Format is how messages are rendered.
func (l *Logger) Format() Format { return Format(l.format.Load()) }

// jsonMessagePrefix starts every message rendered as JSON.
const jsonMessagePrefix = `{"msg":`

func isJSONMessage(m string) bool {
	return strings.HasPrefix(m, jsonMessagePrefix) && strings.HasSuffix(m, "}")
}

// LogAttrs logs msg with structured attributes (tool, session, duration,
// decision id), rendered in the logger's format: as text, msg then
// key=value pairs; as JSON, one object. Nothing is rendered when level is
// disabled.
func (l *Logger) LogAttrs(level Level, msg string, attrs ...slog.Attr) {
	if !l.Enabled(level) {
		return
	}
	l.emit(level, l.render(msg, attrs))
}

// Logf, in JSON format, is rendered as {"msg": the formatted text}.
func (l *Logger) render(msg string, attrs []slog.Attr) string {
	if l.Format() == FormatJSON {
		b := make([]byte, 0, 64+len(msg)+32*len(attrs))
		b = append(b, jsonMessagePrefix...)
		b = appendJSONString(b, msg)
		for _, a := range attrs {
			b = appendJSONAttr(b, "", a)
		}
		return string(append(b, '}'))
	}
	var b strings.Builder
	b.WriteString(msg)
	for _, a := range attrs {
		appendTextAttr(&b, "", a)
	}
	return b.String()
}

func appendJSONString(b []byte, s string) []byte {
	out, _ := json.Marshal(s) // never fails for a string; invalid UTF-8 becomes U+FFFD
	return append(b, out...)
}

func appendJSONAttr(b []byte, prefix string, a slog.Attr) []byte {
	v := a.Value.Resolve()
	if v.Kind() == slog.KindGroup {
		for _, g := range v.Group() {
			b = appendJSONAttr(b, prefix+a.Key+".", g)
		}
		return b
	}
	b = append(b, ',')
	b = appendJSONString(b, prefix+a.Key)
	b = append(b, ':')
	switch v.Kind() {
	case slog.KindInt64:
		return strconv.AppendInt(b, v.Int64(), 10)
	case slog.KindUint64:
		return strconv.AppendUint(b, v.Uint64(), 10)
	case slog.KindFloat64:
		return strconv.AppendFloat(b, v.Float64(), 'g', -1, 64)
	case slog.KindBool:
		return strconv.AppendBool(b, v.Bool())
	case slog.KindDuration:
		return strconv.AppendFloat(b, float64(v.Duration().Microseconds())/1000, 'f', -1, 64) // milliseconds
	case slog.KindTime:
		return appendJSONString(b, v.Time().UTC().Format(TimeFormat))
	}
	return appendJSONString(b, v.String())
}

func appendTextAttr(b *strings.Builder, prefix string, a slog.Attr) {
	v := a.Value.Resolve()
	if v.Kind() == slog.KindGroup {
		for _, g := range v.Group() {
			appendTextAttr(b, prefix+a.Key+".", g)
		}
		return
	}
	b.WriteByte(' ')
	b.WriteString(prefix + a.Key)
	b.WriteByte('=')
	var s string
	switch v.Kind() {
	case slog.KindDuration:
		s = strconv.FormatFloat(float64(v.Duration().Microseconds())/1000, 'f', -1, 64) + "ms"
	case slog.KindTime:
		s = v.Time().UTC().Format(TimeFormat)
	default:
		s = v.String()
	}
	if needsQuote(s) {
		s = strconv.Quote(s)
	}
	b.WriteString(s)
}

func needsQuote(s string) bool {
	if s == "" {
		return true
	}
	for _, r := range s {
		if r <= ' ' || r == '"' || r == '=' || r == utf8.RuneError {
			return true
		}
	}
	return false
}

// Slog returns a log/slog Logger that writes through l: its records reach
// the same sink (the C log handler, stderr) with their attributes, in l's
// format. Levels map to the nearest of l's (below info is debug).
func (l *Logger) Slog() *slog.Logger { return slog.New(&handler{l: l}) }

type handler struct {
	l      *Logger
	attrs  []slog.Attr
	prefix string // groups opened, "a.b."
}

func slogLevel(lv slog.Level) Level {
	switch {
	case lv >= slog.LevelError:
		return Error
	case lv >= slog.LevelWarn:
		return Warn
	case lv >= slog.LevelInfo:
		return Info
	}
	return Debug
}

func (h *handler) Enabled(_ context.Context, lv slog.Level) bool { return h.l.Enabled(slogLevel(lv)) }

func (h *handler) Handle(_ context.Context, r slog.Record) error {
	attrs := append([]slog.Attr(nil), h.attrs...)
	r.Attrs(func(a slog.Attr) bool {
		if h.prefix != "" {
			a.Key = h.prefix + a.Key
		}
		attrs = append(attrs, a)
		return true
	})
	h.l.LogAttrs(slogLevel(r.Level), r.Message, attrs...)
	return nil
}

func (h *handler) WithAttrs(as []slog.Attr) slog.Handler {
	n := &handler{l: h.l, prefix: h.prefix, attrs: append([]slog.Attr(nil), h.attrs...)}
	for _, a := range as {
		if h.prefix != "" {
			a.Key = h.prefix + a.Key
		}
		n.attrs = append(n.attrs, a)
	}
	return n
}

func (h *handler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	return &handler{l: h.l, attrs: h.attrs, prefix: h.prefix + name + "."}
}
