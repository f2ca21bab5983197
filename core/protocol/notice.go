package protocol

// Notice is a message for the caller from a rule (notify_self) or a
// callback, returned in the envelope of the call that caused it and queued
// for the session (notifications_drain).
type Notice struct {
	Rule     string `json:"rule,omitempty"`
	Callback string `json:"callback,omitempty"` // set instead of Rule for a callback's notice (SPEC §9.5)
	Message  string `json:"message"`
	Priority string `json:"priority"`
	Event    string `json:"event,omitempty"`
}

// AppendNotices appends notices as a JSON array.
func AppendNotices(dst []byte, ns []Notice) []byte {
	dst = append(dst, '[')
	for i := range ns {
		if i > 0 {
			dst = append(dst, ',')
		}
		n := &ns[i]
		if n.Callback != "" {
			dst = append(dst, `{"callback":`...)
			dst = AppendString(dst, n.Callback)
		} else {
			dst = append(dst, `{"rule":`...)
			dst = AppendString(dst, n.Rule)
		}
		dst = append(dst, `,"message":`...)
		dst = AppendString(dst, n.Message)
		dst = append(dst, `,"priority":`...)
		dst = AppendString(dst, n.Priority)
		if n.Event != "" { // absent for notices no event caused (a Lua tool's, a callback started)
			dst = append(dst, `,"event":`...)
			dst = AppendString(dst, n.Event)
		}
		dst = append(dst, '}')
	}
	return append(dst, ']')
}
