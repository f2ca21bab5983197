package protocol

import (
	"fmt"
	"unsafe"

	"github.com/tidwall/gjson"
)

// DefaultSession is the session of a request that names none.
const DefaultSession = "default"

// Limits bound what Parse accepts before any other work is done.
type Limits struct {
	MaxRequestBytes int // larger requests are invalid_request (config limits.max_request_bytes)
	MaxDepth        int // deeper nesting is invalid_request (config limits.max_depth)
}

// Request is one parsed request. Its strings and byte slices point into the
// bytes given to Parse (or into the scratch buffer Parse compacted them
// into), which may be a C caller's buffer freed when the call returns:
// copy anything that must outlive the call (strings.Clone, bytes.Clone).
type Request struct {
	// Simple is true for the simple form: no "tool" key, the whole object
	// is the arguments of the default evaluator, and every other field
	// below keeps its zero value except Session.
	Simple    bool
	Tool      string
	Arguments []byte // a compact JSON object; `{}` when absent
	Session   string // DefaultSession when absent
	ID        []byte // raw JSON string or number; nil when absent
	Policy    []byte // raw JSON object; nil when absent
	Async     bool
	Trace     bool
}

var emptyObject = []byte("{}")

// Fields of the explicit form, for duplicate detection and messages.
const knownFields = "tool, arguments, session, id, policy, async, trace"

const (
	fTool = 1 << iota
	fArguments
	fSession
	fID
	fPolicy
	fAsync
	fTrace
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
	sc, serr := ScanStrict(data, maxDepth)
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
			Message: "Invalid JSON: the request must be an object, got " + kindOf(doc[0])}
	}
	if sc.Spaced {
		scratch = AppendCompact(scratch[:0], doc)
		doc = scratch
	}
	req, err := fields(doc)
	return req, scratch, err
}

func kindOf(first byte) string {
	switch first {
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

// fields reads the top-level members of a compact, valid JSON object.
func fields(doc []byte) (Request, *Error) {
	req := Request{Session: DefaultSession}
	var seen int
	var unknown, duplicate string
	var bad *Error
	root := gjson.Parse(unsafe.String(unsafe.SliceData(doc), len(doc)))
	root.ForEach(func(k, v gjson.Result) bool {
		var bit int
		switch k.Str {
		case "tool":
			bit = fTool
			if v.Type != gjson.String || v.Str == "" {
				bad = firstErr(bad, fieldType("tool", "a non-empty string", v))
			}
			req.Tool = v.Str
		case "arguments":
			bit = fArguments
			if !v.IsObject() {
				bad = firstErr(bad, fieldType("arguments", "an object", v))
			}
			req.Arguments = doc[v.Index : v.Index+len(v.Raw)]
		case "session":
			bit = fSession
			if v.Type != gjson.String || v.Str == "" {
				bad = firstErr(bad, fieldType("session", "a non-empty string", v))
			}
			req.Session = v.Str
		case "id":
			bit = fID
			if v.Type != gjson.String && v.Type != gjson.Number {
				bad = firstErr(bad, fieldType("id", "a string or a number", v))
			}
			req.ID = doc[v.Index : v.Index+len(v.Raw)]
		case "policy":
			bit = fPolicy
			if !v.IsObject() {
				bad = firstErr(bad, fieldType("policy", "an object", v))
			}
			req.Policy = doc[v.Index : v.Index+len(v.Raw)]
		case "async":
			bit = fAsync
			if !v.IsBool() {
				bad = firstErr(bad, fieldType("async", "a boolean", v))
			}
			req.Async = v.Type == gjson.True
		case "trace":
			bit = fTrace
			if !v.IsBool() {
				bad = firstErr(bad, fieldType("trace", "a boolean", v))
			}
			req.Trace = v.Type == gjson.True
		default:
			if unknown == "" {
				unknown = k.Str
			}
			return true
		}
		if seen&bit != 0 && duplicate == "" {
			duplicate = k.Str
		}
		seen |= bit
		return true
	})
	if seen&fTool == 0 {
		// Simple form: every field is an argument of the default evaluator.
		return Request{Simple: true, Arguments: doc, Session: DefaultSession}, nil
	}
	switch {
	case duplicate != "":
		return Request{}, Errorf(InvalidRequest, "field %q appears more than once", duplicate)
	case bad != nil:
		return Request{}, bad
	case unknown != "":
		return Request{}, Errorf(InvalidRequest, "unknown field %q in request (known: %s)", unknown, knownFields)
	}
	if req.Arguments == nil {
		req.Arguments = emptyObject
	}
	return req, nil
}

func firstErr(have, next *Error) *Error {
	if have != nil {
		return have
	}
	return next
}

func fieldType(name, want string, v gjson.Result) *Error {
	return &Error{Code: InvalidRequest, Message: fmt.Sprintf("%q must be %s, got %s", name, want, typeName(v))}
}

func typeName(v gjson.Result) string {
	switch v.Type {
	case gjson.String:
		if v.Str == "" {
			return "an empty string"
		}
		return "a string"
	case gjson.Number:
		return "a number"
	case gjson.True, gjson.False:
		return "a boolean"
	case gjson.Null:
		return "null"
	}
	if v.IsArray() {
		return "an array"
	}
	return "an object"
}
