package rules

import (
	"encoding/json"
	"strconv"

	"github.com/clara-lib/clara/core/jsonx"
	"github.com/clara-lib/clara/core/protocol"
)

// ActionRecord is what one action of a fired rule did, as listed in Fired
// and TraceEntry. Which fields it has in JSON depends on Type (and on
// Error), as in an object made for the action:
//
//	notify_self  message, priority
//	log          level, message
//	set_state    key, value            or error
//	deny         reason
//	emit_event   event, fired          or event, error
//	call_tool    tool, result          or tool, error
//	ask, block   reason
//	rewrite      before_sha256, after_sha256 (once the engine applied it)
//	redact       (nothing more)
//
// always with "type", keys in sorted order (as encoding/json writes a
// map). A field that does not belong to Type is not written. Error is set
// when the action failed; an empty Error means it did not.
type ActionRecord struct {
	Type     string
	Message  string          // notify_self, log
	Priority string          // notify_self
	Level    string          // log
	Key      string          // set_state
	Value    any             // set_state
	Reason   string          // deny
	Event    string          // emit_event
	Fired    int             // emit_event: rules the event fired
	Tool     string          // call_tool
	Result   json.RawMessage // call_tool
	// rewrite: the SHA-256 (hex) of the arguments (or prompt) before and
	// after, which the engine writes when it applies the rewrite.
	Before, After string
	Error         string
	// notify_self delivered later: its deliver_on and deliver_after_ms
	DeliverOn      string
	DeliverAfterMS int
}

// Field presence by kind: the JSON object of a record holds these keys.
const (
	recMessage = 1 << iota
	recPriority
	recLevel
	recKey
	recValue
	recReason
	recEvent
	recFired
	recTool
	recResult
	recHashes
	recDelivery
)

// fields says which keys the record has besides "type" and "error".
func (r *ActionRecord) fields() int {
	failed := r.Error != ""
	switch r.Type {
	case ActNotify:
		if r.DeliverOn != "" || r.DeliverAfterMS > 0 {
			return recMessage | recPriority | recDelivery
		}
		return recMessage | recPriority
	case ActLog:
		return recLevel | recMessage
	case ActSetState:
		if failed {
			return 0
		}
		return recKey | recValue
	case ActDeny, ActAsk, ActBlock:
		return recReason
	case ActRewrite:
		if r.Before != "" || r.After != "" {
			return recHashes
		}
	case ActEmit:
		if failed {
			return recEvent
		}
		return recEvent | recFired
	case ActCallTool:
		if failed {
			return recTool
		}
		return recTool | recResult
	}
	return 0
}

// MarshalJSON writes the record as appendRecord does (as encoding/json
// would write an object of the record's keys). HTML characters are left as
// they are: the encoder the record is written by escapes them when it
// does (json.Marshal).
func (r ActionRecord) MarshalJSON() ([]byte, error) { return appendRecord(nil, &r), nil }

// appendRecord writes the record as jsonx.AppendValue would write a map of its
// keys (those fields says it has, "type" and "error"), sorted, without
// building the map. It is the one serializer of records.
func appendRecord(dst []byte, r *ActionRecord) []byte { return appendRecordWith(dst, r, nil) }

// appendRecordWith is appendRecord writing its strings through w (nil:
// each escaped where it is written).
func appendRecordWith(dst []byte, r *ActionRecord, w *written) []byte {
	if w != nil && r.Type == ActNotify && r.Error == "" && r.DeliverOn == "" && r.DeliverAfterMS == 0 {
		// The commonest record; its notice repeats its message and
		// priority, which w notes for appendNotices to copy.
		dst = append(dst, '{')
		start := len(dst)
		dst = append(dst, `"message":`...)
		dst = w.appendString(dst, r.Message)
		dst = append(dst, `,"priority":`...)
		dst = w.appendString(dst, r.Priority)
		w.note(r.Message, r.Priority, start, len(dst))
		return append(dst, `,"type":"notify_self"}`...)
	}
	f := r.fields()
	dst = append(dst, '{')
	// Keys in sorted order: after_sha256, before_sha256, deliver_after_ms,
	// deliver_on, error, event, fired, key, level, message, priority,
	// reason, result, tool, type, value. "type" is always there, so every key before it is followed
	// by a comma.
	if f&recHashes != 0 {
		dst = append(dst, `"after_sha256":`...)
		dst = protocol.AppendString(dst, r.After)
		dst = append(dst, `,"before_sha256":`...)
		dst = protocol.AppendString(dst, r.Before)
		dst = append(dst, ',')
	}
	if f&recDelivery != 0 {
		if r.DeliverAfterMS > 0 {
			dst = append(dst, `"deliver_after_ms":`...)
			dst = strconv.AppendInt(dst, int64(r.DeliverAfterMS), 10)
			dst = append(dst, ',')
		}
		if r.DeliverOn != "" {
			dst = append(dst, `"deliver_on":`...)
			dst = w.appendString(dst, r.DeliverOn)
			dst = append(dst, ',')
		}
	}
	if r.Error != "" {
		dst = append(dst, `"error":`...)
		dst = w.appendString(dst, r.Error)
		dst = append(dst, ',')
	}
	if f&recEvent != 0 {
		dst = append(dst, `"event":`...)
		dst = w.appendString(dst, r.Event)
		dst = append(dst, ',')
	}
	if f&recFired != 0 {
		dst = append(dst, `"fired":`...)
		dst = strconv.AppendInt(dst, int64(r.Fired), 10)
		dst = append(dst, ',')
	}
	if f&recKey != 0 {
		dst = append(dst, `"key":`...)
		dst = w.appendString(dst, r.Key)
		dst = append(dst, ',')
	}
	if f&recLevel != 0 {
		dst = append(dst, `"level":`...)
		dst = w.appendString(dst, r.Level)
		dst = append(dst, ',')
	}
	if f&recMessage != 0 {
		dst = append(dst, `"message":`...)
		dst = w.appendString(dst, r.Message)
		dst = append(dst, ',')
	}
	if f&recPriority != 0 {
		dst = append(dst, `"priority":`...)
		dst = w.appendString(dst, r.Priority)
		dst = append(dst, ',')
	}
	if f&recReason != 0 {
		dst = append(dst, `"reason":`...)
		dst = w.appendString(dst, r.Reason)
		dst = append(dst, ',')
	}
	if f&recResult != 0 {
		dst = append(dst, `"result":`...)
		if len(r.Result) == 0 {
			dst = append(dst, "null"...)
		} else {
			dst = append(dst, r.Result...)
		}
		dst = append(dst, ',')
	}
	if f&recTool != 0 {
		dst = append(dst, `"tool":`...)
		dst = w.appendString(dst, r.Tool)
		dst = append(dst, ',')
	}
	dst = append(dst, `"type":`...)
	dst = w.appendString(dst, r.Type)
	if f&recValue != 0 {
		dst = append(dst, `,"value":`...)
		dst = jsonx.AppendValue(dst, r.Value)
	}
	return append(dst, '}')
}
