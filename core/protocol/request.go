package protocol

import (
	"bytes"
	"fmt"
	"strings"
	"unsafe"

	"github.com/clara-lib/clara/core/jsonx"

	"github.com/tidwall/gjson"
)

// DefaultSession is the session of a request that names none.
const DefaultSession = "default"

// MaxSessionBytes caps a session name, in requests and events alike: a
// session outlives its call (a map key, a rate window, an audit record).
const MaxSessionBytes = 256

// SessionName checks a session name given by a caller and returns Clara's
// own copy of it: nothing kept after a call may point into the caller's
// memory, and a session always outlives the call that named it.
func SessionName(name string) (string, *Error) {
	switch {
	case name == DefaultSession:
		return DefaultSession, nil
	case len(name) > MaxSessionBytes:
		return "", Errorf(InvalidRequest, "\"session\" is %d bytes; a session name is at most %d bytes", len(name), MaxSessionBytes)
	}
	return strings.Clone(name), nil
}

// Limits bound what Parse accepts before any other work is done.
type Limits struct {
	MaxRequestBytes int // larger requests are invalid_request (config limits.max_request_bytes)
	MaxDepth        int // deeper nesting is invalid_request (config limits.max_depth)
	// OwnSession, when set, turns a valid session name borrowed from the
	// request into Clara's own string (the engine returns the name its
	// session table already keeps, so that calls naming a live session
	// allocate nothing); nil: a fresh copy.
	OwnSession func(borrowed string) string
}

// Request is one parsed request. What is borrowed and what is owned is
// decided here, at the boundary: Session is Clara's own copy (sessions
// outlive calls); Tool, Arguments, ID and Policy point into the bytes given
// to Parse (or into the scratch buffer Parse compacted them into), which
// may be a C caller's buffer freed when the call returns. They are valid
// during the call only: copy anything that must outlive it.
type Request struct {
	// Simple is true for the simple form: no "tool" key, the whole object
	// is the arguments of the default evaluator, and every other field
	// below keeps its zero value except Session.
	Simple    bool
	Tool      string // borrowed
	Arguments []byte // a compact JSON object; `{}` when absent; borrowed
	Session   string // DefaultSession when absent; owned, at most MaxSessionBytes
	ID        []byte // raw JSON string or number; nil when absent
	Policy    []byte // raw JSON object; nil when absent; borrowed
	// Meta is MCP's _meta (e.g. _meta.traceparent): an opaque object
	// passed to the audit and to the rules' context; nil when absent;
	// borrowed.
	Meta  []byte
	Async bool
	Trace bool
}

var emptyObject = []byte("{}")

// Fields of the explicit form, for duplicate detection and messages.
const knownFields = "tool, arguments, session, id, policy, async, trace, _meta"

const (
	fTool = 1 << iota
	fArguments
	fSession
	fID
	fPolicy
	fAsync
	fTrace
	fMeta
)

// Parse checks data against lim and the protocol and returns the request.
// When data contains whitespace between tokens it is compacted into scratch
// first (grown as needed and returned for reuse), so that every raw value in
// the Request is compact JSON. The returned error, if any, is an *Error with
// code invalid_json or invalid_request.
func Parse(data []byte, lim Limits, scratch []byte) (Request, []byte, *Error) {
	if len(data) == 0 {
		return Request{}, scratch, &Error{Code: InvalidJSON, Message: "Invalid JSON: empty input"}
	}
	if lim.MaxRequestBytes > 0 && len(data) > lim.MaxRequestBytes {
		return Request{}, scratch, Errorf(InvalidRequest,
			"request is %d bytes, more than limits.max_request_bytes (%d)", len(data), lim.MaxRequestBytes)
	}
	maxDepth := lim.MaxDepth
	if maxDepth <= 0 {
		maxDepth = 512
	}
	var s jsonx.Scanner
	sc, serr := s.ScanObject(data, maxDepth)
	if serr != nil {
		if serr.TooDeep {
			return Request{}, scratch, Errorf(InvalidRequest,
				"request nests deeper than limits.max_depth (%d) at byte %d", maxDepth, serr.Offset)
		}
		return Request{}, scratch, &Error{Code: InvalidJSON, Message: "Invalid JSON: " + serr.Error()}
	}
	doc := data[sc.Start:sc.End]
	if doc[0] != '{' {
		return Request{}, scratch, &Error{Code: InvalidJSON,
			Message: "Invalid JSON: the request must be an object, got " + KindOf(doc[0])}
	}
	if sc.Spaced {
		// Values are passed on compact: scan the compact copy for the
		// members' offsets in it (only requests with whitespace pay twice).
		scratch = AppendCompact(scratch[:0], doc)
		doc = scratch
		if _, serr := s.ScanObject(doc, maxDepth); serr != nil {
			return Request{}, scratch, InternalError(fmt.Errorf("compacting a valid request broke it: %v", serr))
		}
	}
	req, err := fields(doc, &s, lim.OwnSession)
	return req, scratch, err
}

// KindOf names the kind of the JSON value that starts with first, for
// messages: "an object", "an array", "a string", "a boolean", "null",
// "a number".
func KindOf(first byte) string {
	switch first {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	default:
		return "a number"
	}
}

// fields reads the top-level members of a compact, valid JSON object, found
// by the scan; string values are decoded with gjson.
func fields(doc []byte, ms *jsonx.Scanner, ownSession func(string) string) (Request, *Error) {
	req := Request{Session: DefaultSession}
	var seen int
	var unknown string
	var bad *Error
	for i := 0; i < ms.Members(); i++ {
		m := ms.Member(i)
		raw := doc[m.Start:m.End]
		switch m.Key {
		case "tool":
			seen |= fTool
			req.Tool = stringValue(raw)
			if raw[0] != '"' || req.Tool == "" {
				bad = firstErr(bad, fieldType("tool", "a non-empty string", raw))
			}
		case "arguments":
			seen |= fArguments
			if raw[0] != '{' {
				bad = firstErr(bad, fieldType("arguments", "an object", raw))
			}
			req.Arguments = raw
		case "session":
			seen |= fSession
			req.Session = stringValue(raw)
			if raw[0] != '"' || req.Session == "" {
				bad = firstErr(bad, fieldType("session", "a non-empty string", raw))
			}
		case "id":
			seen |= fID
			if raw[0] != '"' && raw[0] != '-' && (raw[0] < '0' || raw[0] > '9') {
				bad = firstErr(bad, fieldType("id", "a string or a number", raw))
			}
			req.ID = raw
		case "policy":
			seen |= fPolicy
			if raw[0] != '{' {
				bad = firstErr(bad, fieldType("policy", "an object", raw))
			}
			req.Policy = raw
		case "async":
			seen |= fAsync
			if raw[0] != 't' && raw[0] != 'f' {
				bad = firstErr(bad, fieldType("async", "a boolean", raw))
			}
			req.Async = raw[0] == 't'
		case "_meta":
			seen |= fMeta
			if raw[0] != '{' {
				bad = firstErr(bad, fieldType("_meta", "an object", raw))
			}
			req.Meta = raw
		case "trace":
			seen |= fTrace
			if raw[0] != 't' && raw[0] != 'f' {
				bad = firstErr(bad, fieldType("trace", "a boolean", raw))
			}
			req.Trace = raw[0] == 't'
		default:
			if unknown == "" {
				unknown = m.Key
			}
		}
	}
	if seen&fTool == 0 {
		// Simple form: every field is an argument of the default evaluator.
		return Request{Simple: true, Arguments: doc, Session: DefaultSession}, nil
	}
	switch {
	case bad != nil:
		return Request{}, bad
	case unknown != "":
		return Request{}, Errorf(InvalidRequest, "unknown field %q in request (known: %s)", unknown, knownFields)
	}
	switch {
	case len(req.Session) > MaxSessionBytes:
		_, err := SessionName(req.Session)
		return Request{}, err
	case ownSession != nil:
		req.Session = ownSession(req.Session)
	default:
		req.Session, _ = SessionName(req.Session)
	}
	if req.Arguments == nil {
		req.Arguments = emptyObject
	}
	return req, nil
}

// stringValue decodes a JSON string value ("" for other values): without
// escapes it is the bytes between the quotes; otherwise gjson unescapes.
func stringValue(raw []byte) string {
	if raw[0] != '"' {
		return ""
	}
	body := raw[1 : len(raw)-1]
	if bytes.IndexByte(body, '\\') < 0 {
		return unsafe.String(unsafe.SliceData(body), len(body))
	}
	return gjson.Parse(unsafe.String(unsafe.SliceData(raw), len(raw))).Str
}

func firstErr(have, next *Error) *Error {
	if have != nil {
		return have
	}
	return next
}

func fieldType(name, want string, raw []byte) *Error {
	return &Error{Code: InvalidRequest, Message: fmt.Sprintf("%q must be %s, got %s", name, want, typeName(raw))}
}

// typeName names the type of a raw JSON value by its first byte.
func typeName(raw []byte) string {
	if string(raw) == `""` {
		return "an empty string"
	}
	return KindOf(raw[0])
}
