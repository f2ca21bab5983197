package rules

import (
	"math"
	"strconv"
	"unsafe"

	"github.com/clara-lib/clara/core/jsonx"
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
		dst = jsonx.AppendString(dst, e.Rule)
		dst = append(dst, `,"event":`...)
		dst = jsonx.AppendString(dst, e.Event)
		dst = append(dst, `,"matched":`...)
		dst = strconv.AppendBool(dst, e.Matched)
		if e.Value != nil {
			dst = append(dst, `,"value":`...)
			dst = jsonx.AppendValue(dst, e.Value)
		}
		if e.Error != "" {
			dst = append(dst, `,"error":`...)
			dst = jsonx.AppendString(dst, e.Error)
		}
		dst = append(dst, `,"duration_us":`...)
		dst = strconv.AppendInt(dst, e.DurationUS, 10)
		if len(e.Actions) > 0 {
			dst = append(dst, `,"actions":`...)
			dst = appendRecords(dst, e.Actions)
		}
		if e.Skipped != "" {
			dst = append(dst, `,"skipped":`...)
			dst = jsonx.AppendString(dst, e.Skipped)
		}
		if e.Mode != "" {
			dst = append(dst, `,"mode":`...)
			dst = jsonx.AppendString(dst, e.Mode)
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

// appendString is jsonx.AppendString(dst, s), copied from where s was
// written before when it was (dst is the buffer it was written to).
func (w *written) appendString(dst []byte, s string) []byte {
	if w == nil || len(s) == 0 || len(dst) >= math.MaxInt32-6*len(s) {
		return jsonx.AppendString(dst, s)
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
	dst = jsonx.AppendString(dst, s)
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
		dst = jsonx.AppendString(dst, o.Denied.Rule)
		dst = append(dst, `,"reason":`...)
		dst = jsonx.AppendString(dst, o.Denied.Reason)
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
