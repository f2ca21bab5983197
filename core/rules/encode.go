package rules

import (
	"bytes"
	"encoding/json"
	"math"
	"sort"
	"strconv"
	"unsafe"

	"github.com/clara-lib/clara/core/protocol"
)

// The JSON of what rules did is written by hand: an emission's answer is
// on the path of every clara_emit, and encoding/json spends more on its
// maps (reflection, sorting through interfaces) than the rules spent
// firing. The output is byte for byte what encoding/json would write.

// AppendTrace appends trace entries as a JSON array.
func AppendTrace(dst []byte, entries []TraceEntry) []byte {
	dst = append(dst, '[')
	for i := range entries {
		if i > 0 {
			dst = append(dst, ',')
		}
		e := &entries[i]
		dst = append(dst, `{"rule":`...)
		dst = protocol.AppendString(dst, e.Rule)
		dst = append(dst, `,"event":`...)
		dst = protocol.AppendString(dst, e.Event)
		dst = append(dst, `,"matched":`...)
		dst = strconv.AppendBool(dst, e.Matched)
		if e.Value != nil {
			dst = append(dst, `,"value":`...)
			dst = appendValue(dst, e.Value)
		}
		if e.Error != "" {
			dst = append(dst, `,"error":`...)
			dst = protocol.AppendString(dst, e.Error)
		}
		dst = append(dst, `,"duration_us":`...)
		dst = strconv.AppendInt(dst, e.DurationUS, 10)
		if len(e.Actions) > 0 {
			dst = append(dst, `,"actions":`...)
			dst = appendRecords(dst, e.Actions)
		}
		if e.Skipped != "" {
			dst = append(dst, `,"skipped":`...)
			dst = protocol.AppendString(dst, e.Skipped)
		}
		if e.Mode != "" {
			dst = append(dst, `,"mode":`...)
			dst = protocol.AppendString(dst, e.Mode)
		}
		dst = append(dst, '}')
	}
	return append(dst, ']')
}

// written remembers where strings were written as JSON in the answer
// being built, by the address and length of their bytes: the same string
// (a rule's ID, a notice's message in its record and in Notices, the
// priority, the event's name) is escaped once, then copied. An answer
// writes each of these several times; escaping is what its encoding
// spent most on. (Addresses as integers: the outcome being written keeps
// its strings alive, and nothing is kept past it.)
type written struct {
	at [1 << writtenBits]struct {
		p          uintptr
		n          int
		start, end int32
	}
	// notes are where the first notify_self records wrote
	// `"message":…,"priority":…`, in order: the notices of an emission
	// repeat them, in the same order.
	notes  [16]notedSpan
	nnotes int
}

type notedSpan struct {
	msg, prio  string
	start, end int32
}

// note records that dst[start:end] is `"message":msg,"priority":prio`.
func (w *written) note(msg, prio string, start, end int) {
	if w.nnotes < len(w.notes) && end < math.MaxInt32 {
		w.notes[w.nnotes] = notedSpan{msg, prio, int32(start), int32(end)}
		w.nnotes++
	}
}

// same reports whether a and b are the same string: the same bytes at
// the same address (what written keys on), not only equal ones.
func same(a, b string) bool {
	return len(a) == len(b) && unsafe.StringData(a) == unsafe.StringData(b)
}

const writtenBits = 7

// appendString is protocol.AppendString(dst, s), copied from where s was
// written before when it was (dst is the buffer it was written to).
func (w *written) appendString(dst []byte, s string) []byte {
	if w == nil || len(s) == 0 || len(dst) >= math.MaxInt32-6*len(s) {
		return protocol.AppendString(dst, s)
	}
	p := uintptr(unsafe.Pointer(unsafe.StringData(s)))
	// Strings made one after the other lie a size class apart: their
	// addresses are mixed (murmur3's finalizer) for the table's index.
	h := uint64(p) ^ uint64(len(s))<<48
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	// Two entries may hold s: the one h names and the next.
	e := &w.at[h%(1<<writtenBits)]
	if e.p != p || e.n != len(s) {
		if f := &w.at[(h+1)%(1<<writtenBits)]; f.p == p && f.n == len(s) || e.p != 0 && f.p == 0 {
			e = f
		}
	}
	if e.p == p && e.n == len(s) {
		return append(dst, dst[e.start:e.end]...)
	}
	start := len(dst)
	dst = protocol.AppendString(dst, s)
	e.p, e.n, e.start, e.end = p, len(s), int32(start), int32(len(dst))
	return dst
}

// AppendJSON appends the outcome as the result object of an emission:
// {"fired":[...],"notices":[...],"denied":...}, with "trace" when withTrace.
func (o *Outcome) AppendJSON(dst []byte, withTrace bool) []byte {
	var w written
	dst = append(dst, `{"fired":[`...)
	for i := range o.Fired {
		if i > 0 {
			dst = append(dst, ',')
		}
		f := &o.Fired[i]
		dst = append(dst, `{"rule":`...)
		dst = w.appendString(dst, f.Rule)
		if f.Event != "" {
			dst = append(dst, `,"event":`...)
			dst = w.appendString(dst, f.Event)
		}
		dst = append(dst, `,"actions":`...)
		dst = appendRecordsWith(dst, f.Actions, &w)
		dst = append(dst, '}')
	}
	dst = append(dst, `],"notices":`...)
	dst = appendNotices(dst, o.Notices, &w)
	dst = append(dst, `,"denied":`...)
	if o.Denied == nil {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, `{"rule":`...)
		dst = protocol.AppendString(dst, o.Denied.Rule)
		dst = append(dst, `,"reason":`...)
		dst = protocol.AppendString(dst, o.Denied.Reason)
		dst = append(dst, '}')
	}
	if withTrace {
		dst = append(dst, `,"trace":`...)
		dst = AppendTrace(dst, o.Trace)
	}
	return append(dst, '}')
}

func appendRecords(dst []byte, records []ActionRecord) []byte {
	return appendRecordsWith(dst, records, nil)
}

func appendRecordsWith(dst []byte, records []ActionRecord, w *written) []byte {
	if records == nil {
		return append(dst, "null"...)
	}
	dst = append(dst, '[')
	for i := range records {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendRecordWith(dst, &records[i], w)
	}
	return append(dst, ']')
}

// appendNotices is protocol.AppendNotices, its strings written through w.
func appendNotices(dst []byte, ns []protocol.Notice, w *written) []byte {
	next := 0 // the next of w's notes a notice may repeat
	dst = append(dst, '[')
	for i := range ns {
		if i > 0 {
			dst = append(dst, ',')
		}
		n := &ns[i]
		if n.Callback != "" {
			dst = append(dst, `{"callback":`...)
			dst = w.appendString(dst, n.Callback)
		} else {
			dst = append(dst, `{"rule":`...)
			dst = w.appendString(dst, n.Rule)
		}
		if k := next; w != nil && k < w.nnotes && same(w.notes[k].msg, n.Message) && same(w.notes[k].prio, n.Priority) {
			dst = append(dst, ',')
			dst = append(dst, dst[w.notes[k].start:w.notes[k].end]...)
			next++
		} else {
			dst = append(dst, `,"message":`...)
			dst = w.appendString(dst, n.Message)
			dst = append(dst, `,"priority":`...)
			dst = w.appendString(dst, n.Priority)
		}
		if n.Event != "" {
			dst = append(dst, `,"event":`...)
			dst = w.appendString(dst, n.Event)
		}
		dst = append(dst, '}')
	}
	return append(dst, ']')
}

// appendValue appends a JSON-like value (what rules hold: decoded JSON,
// expr results) as encoding/json would, keys sorted. Values it cannot
// write (NaN, infinities, types that are not JSON) are written as null;
// encoding/json would fail the whole answer for one bad value.
func appendValue(dst []byte, v any) []byte {
	switch x := v.(type) {
	case nil:
		return append(dst, "null"...)
	case bool:
		return strconv.AppendBool(dst, x)
	case string:
		return protocol.AppendString(dst, x)
	case float64:
		return appendFloat(dst, x)
	case int:
		return strconv.AppendInt(dst, int64(x), 10)
	case int64:
		return strconv.AppendInt(dst, x, 10)
	case json.RawMessage:
		if len(x) == 0 {
			return append(dst, "null"...)
		}
		return append(dst, x...)
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		dst = append(dst, '{')
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = protocol.AppendString(dst, k)
			dst = append(dst, ':')
			dst = appendValue(dst, x[k])
		}
		return append(dst, '}')
	case []any:
		dst = append(dst, '[')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendValue(dst, e)
		}
		return append(dst, ']')
	}
	// Other types (an expr result such as []string): encoding/json's
	// text, with HTML characters as they are, as everywhere else here.
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if enc.Encode(v) != nil {
		return append(dst, "null"...)
	}
	return append(dst, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))...)
}

// appendFloat writes f as encoding/json does (ES6 number formatting).
func appendFloat(dst []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(dst, "null"...)
	}
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	n := len(dst)
	dst = strconv.AppendFloat(dst, f, format, -1, 64)
	if format == 'e' {
		// clean up e-09 to e-9
		if m := len(dst) - n; m >= 4 && dst[len(dst)-4] == 'e' && dst[len(dst)-3] == '-' && dst[len(dst)-2] == '0' {
			dst[len(dst)-2] = dst[len(dst)-1]
			dst = dst[:len(dst)-1]
		}
	}
	return dst
}
