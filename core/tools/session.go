package tools

import (
	"context"
	"encoding/json"

	"github.com/tidwall/gjson"

	"github.com/clara-lib/clara/core/protocol"
	"github.com/clara-lib/clara/core/session"
	"github.com/clara-lib/clara/core/toolbox"
)

func sessionPolicy(sessions *session.Table) toolbox.Builtin {
	return toolbox.Builtin{Name: "session_policy", Admin: true,
		Description: "Narrows the calling session's tool policy (it can never be widened again) and returns it.",
		Schema:      `{"type":"object","properties":{"allow":{"type":"array","items":{"type":"string"}},"deny":{"type":"array","items":{"type":"string"}}},"additionalProperties":false}`,
		Run: func(_ context.Context, call toolbox.Call) ([]byte, error) {
			p, err := toolbox.ParsePolicy(call.Arguments, "")
			if err != nil {
				return nil, protocol.Errorf(protocol.InvalidArgs, "session_policy: %v", err)
			}
			allow, deny := sessions.NarrowPolicy(call.Session, p).Lists()
			if deny == nil {
				deny = []string{}
			}
			return json.Marshal(struct {
				Session string   `json:"session"`
				Allow   []string `json:"allow"`
				Deny    []string `json:"deny"`
			}{call.Session, allow, deny})
		}}
}

func notificationsDrain(sessions *session.Table) toolbox.Builtin {
	return toolbox.Builtin{Name: "notifications_drain", LLMVisible: true,
		Description: "Returns and forgets the notices waiting for the calling session.",
		Schema:      `{"type":"object","additionalProperties":false}`, MaxOutputBytes: 16 << 20,
		Run: func(_ context.Context, call toolbox.Call) ([]byte, error) {
			ns, dropped, err := sessions.Get(call.Session).Drain()
			if err != nil {
				return nil, err
			}
			return json.Marshal(struct {
				Notices []protocol.Notice `json:"notices"`
				Dropped int               `json:"dropped"`
			}{ns, dropped})
		}}
}

// sessionEnd ends a session. The host may name any session; a call made
// inside another (a rule's, a script's, a tool's, a model's) ends only its
// own, or a model or a script could wipe the sessions of others.
func sessionEnd(e Engine) toolbox.Builtin {
	return toolbox.Builtin{Name: "session_end",
		Description:    "Ends a session: emits on_session_end, then frees its in-memory data (its rule state and its policy stay).",
		Schema:         `{"type":"object","properties":{"session":{"type":"string","minLength":1}},"additionalProperties":false}`,
		MaxOutputBytes: 16 << 20,
		Run: func(ctx context.Context, call toolbox.Call) ([]byte, error) {
			name := call.Session
			if v := gjson.GetBytes(call.Arguments, "session"); v.Exists() {
				name = v.Str // gjson copied it out of the arguments
			}
			if name != call.Session && e.Nested(ctx) {
				return nil, protocol.Errorf(protocol.Denied, "session_end: a call made by a rule, a script, a tool or a model ends only its own session (%q), not %q",
					call.Session, name)
			}
			emitted, err := e.EndSession(ctx, name)
			if err != nil {
				return nil, asInvalidArgs(err) // the session named in the arguments
			}
			out := protocol.AppendString([]byte(`{"session":`), name)
			out = append(out, `,"emitted":`...)
			return append(append(out, emitted...), '}'), nil
		}}
}

// asInvalidArgs gives an engine's refusal of a tool's arguments the code
// of the tool's arguments.
func asInvalidArgs(err error) error {
	if pe, ok := err.(*protocol.Error); ok && pe.Code == protocol.InvalidRequest {
		c := *pe
		c.Code = protocol.InvalidArgs
		return &c
	}
	return err
}
