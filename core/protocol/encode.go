package protocol

import (
	"github.com/clara-lib/clara/core/jsonx"
)

// Success is a success envelope. Result is raw JSON (already valid and
// compact); the other fields are optional.
type Success struct {
	ID        []byte // raw JSON string or number, echoed from the request
	Tool      string
	Result    []byte
	Truncated bool
	Extras
}

// Extras are what a call's rules and callbacks add to its envelope,
// success or error: raw JSON arrays, nil when absent.
type Extras struct {
	// DecisionID is the call's decision id (its audit record's), written
	// as a JSON string when set.
	DecisionID []byte
	Notices    []byte
	Callbacks  []byte // results of blocking callbacks the call fired (SPEC §9.5)
	Trace      []byte
}

func (x *Extras) append(dst []byte) []byte {
	if x.DecisionID != nil {
		dst = append(dst, `,"decision_id":"`...)
		dst = append(append(dst, x.DecisionID...), '"')
	}
	if x.Notices != nil {
		dst = append(dst, `,"notices":`...)
		dst = append(dst, x.Notices...)
	}
	if x.Callbacks != nil {
		dst = append(dst, `,"callbacks":`...)
		dst = append(dst, x.Callbacks...)
	}
	if x.Trace != nil {
		dst = append(dst, `,"trace":`...)
		dst = append(dst, x.Trace...)
	}
	return dst
}

// Append writes the envelope to dst:
// {"status":"success","id":…,"tool":…,"result":…,"truncated":true}.
func (s *Success) Append(dst []byte) []byte {
	dst = append(dst, `{"status":"success"`...)
	if s.ID != nil {
		dst = append(dst, `,"id":`...)
		dst = append(dst, s.ID...)
	}
	if s.Tool != "" {
		dst = append(dst, `,"tool":`...)
		dst = AppendString(dst, s.Tool)
	}
	dst = append(dst, `,"result":`...)
	if len(s.Result) == 0 {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, s.Result...)
	}
	if s.Truncated {
		dst = append(dst, `,"truncated":true`...)
	}
	dst = s.Extras.append(dst)
	return append(dst, '}')
}

// AppendError writes an error envelope to dst:
// {"status":"error","id":…,"error":"code","message":"…","details":…}.
// id may be nil.
func AppendError(dst []byte, id []byte, e *Error) []byte {
	return AppendErrorExtras(dst, id, e, Extras{})
}

// AppendErrorExtras is AppendError with notices and a trace.
func AppendErrorExtras(dst []byte, id []byte, e *Error, x Extras) []byte {
	dst = append(dst, `{"status":"error"`...)
	if id != nil {
		dst = append(dst, `,"id":`...)
		dst = append(dst, id...)
	}
	dst = append(dst, `,"error":`...)
	dst = AppendString(dst, string(e.Code))
	dst = append(dst, `,"message":`...)
	dst = AppendString(dst, e.Message)
	if len(e.Details) > 0 {
		dst = append(dst, `,"details":`...)
		dst = append(dst, e.Details...)
	}
	dst = x.append(dst)
	return append(dst, '}')
}

// AppendString writes s as a JSON string, by jsonx's rules (the one set
// of escaping rules of every JSON Clara writes by hand).
func AppendString(dst []byte, s string) []byte { return jsonx.AppendString(dst, s) }

// AppendCompact writes src, valid JSON, without the whitespace between its
// tokens (jsonx.AppendCompact).
func AppendCompact(dst, src []byte) []byte { return jsonx.AppendCompact(dst, src) }
