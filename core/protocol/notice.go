package protocol

import "strconv"

// Notice is a message for the caller from a rule (notify_self) or a
// callback, returned in the envelope of the call that caused it and queued
// for the session (notifications_drain).
type Notice struct {
	Rule     string `json:"rule,omitempty"`
	Callback string `json:"callback,omitempty"` // set instead of Rule for a callback's notice (SPEC §9.5)
	Message  string `json:"message"`
	Priority string `json:"priority"`
	Event    string `json:"event,omitempty"`
	// Count is how many identical notices this one stands for, when the
	// session's queue merged some (notices.dedupe_window_ms); 0 or 1: one.
	Count int `json:"count,omitempty"`
	// Deferred delivery (a notify_self's deliver_on, deliver_after_ms): the
	// session's queue holds the notice until the event DeliverOn next
	// fires in the session, and for DeliverAfterMS at least. Neither is
	// written out: a notice is shown once delivered.
	DeliverOn      string `json:"-"`
	DeliverAfterMS int    `json:"-"`
}

// Deferred reports whether the notice waits in the session's queue
// before it is delivered.
func (n *Notice) Deferred() bool { return n.DeliverOn != "" || n.DeliverAfterMS > 0 }

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
		if n.Count > 1 {
			dst = append(dst, `,"count":`...)
			dst = strconv.AppendInt(dst, int64(n.Count), 10)
		}
		dst = append(dst, '}')
	}
	return append(dst, ']')
}
