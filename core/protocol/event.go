package protocol

import "github.com/tidwall/gjson"

// Event is one parsed emission (SPEC §7.3): clara_emit's argument. Name,
// Session and Payload are Clara's own (the payload is decoded), so an
// event may outlive the text it came from.
type Event struct {
	Name    string
	Session string         // DefaultSession when absent; at most MaxSessionBytes
	Payload map[string]any // nil when absent; numbers are float64
	Trace   bool
}

const eventShape = `an event is {"event", "session", "payload", "trace"}: `

// ParseEvent reads an event as strictly as Parse reads a request: one JSON
// object (invalid_json otherwise) within lim, whose members are the four
// known ones, spelled exactly, each of its type or null (invalid_request
// otherwise). The event name itself is checked by the rule engine.
func ParseEvent(text []byte, lim Limits) (Event, *Error) {
	ev := Event{Session: DefaultSession}
	if len(text) == 0 {
		return ev, &Error{Code: InvalidJSON, Message: "Invalid JSON: empty input"}
	}
	if lim.MaxRequestBytes > 0 && len(text) > lim.MaxRequestBytes {
		return ev, Errorf(InvalidRequest, "event is %d bytes, more than limits.max_request_bytes (%d)", len(text), lim.MaxRequestBytes)
	}
	sc, serr := ScanStrict(text, lim.MaxDepth)
	if serr != nil {
		if serr.TooDeep {
			return ev, Errorf(InvalidRequest, "event nests deeper than limits.max_depth (%d) at byte %d", serr.MaxDepth, serr.Offset)
		}
		return ev, &Error{Code: InvalidJSON, Message: "Invalid JSON: " + serr.Error()}
	}
	if text[sc.Start] != '{' {
		return ev, &Error{Code: InvalidJSON, Message: "Invalid JSON: an event must be an object, got " + KindOf(text[sc.Start])}
	}
	// Members by their exact names (encoding/json would match them without
	// regard to case). The scan checked the text: gjson reads a copy of it
	// (ParseBytes copies), so nothing decoded aliases the caller's bytes.
	var perr *Error
	gjson.ParseBytes(text[sc.Start:sc.End]).ForEach(func(key, value gjson.Result) bool {
		var want string
		switch key.Str {
		case "event", "session":
			want = "a string"
		case "payload":
			want = "an object"
		case "trace":
			want = "a boolean"
		default:
			perr = Errorf(InvalidRequest, eventShape+"unknown field %q", key.Str)
			return false
		}
		if value.Type == gjson.Null {
			return true // null: absent
		}
		if got := KindOf(value.Raw[0]); got != want {
			perr = Errorf(InvalidRequest, eventShape+"%q must be %s, got %s", key.Str, want, got)
			return false
		}
		switch key.Str {
		case "event":
			ev.Name = value.Str
		case "session":
			ev.Session = value.Str
		case "trace":
			ev.Trace = value.Type == gjson.True
		case "payload":
			// Decoded as encoding/json would (float64 numbers, []any,
			// map[string]any), at a fraction of the cost, from gjson's
			// copy of the text.
			payload, _ := decodeValue(value.Raw)
			ev.Payload, _ = payload.(map[string]any)
		}
		return true
	})
	if perr != nil {
		return ev, perr
	}
	if ev.Session == "" {
		ev.Session = DefaultSession
	}
	ev.Session, perr = SessionName(ev.Session)
	return ev, perr
}
