package tools

import (
	"context"

	"github.com/tidwall/gjson"

	"github.com/clara-lib/clara/core/protocol"
	"github.com/clara-lib/clara/core/toolbox"
)

func stateGet(e Engine) toolbox.Builtin {
	return toolbox.Builtin{Name: "state_get", Admin: true,
		Description:    "Reads a value of the calling session's rule state (of a plugin's rules, with plugin).",
		Schema:         `{"type":"object","properties":{"key":{"type":"string","minLength":1,"maxLength":1024},"plugin":{"type":"string","minLength":1}},"required":["key"],"additionalProperties":false}`,
		MaxOutputBytes: 16 << 20,
		Run: func(_ context.Context, call toolbox.Call) ([]byte, error) {
			key := gjson.GetBytes(call.Arguments, "key").Str
			out := protocol.AppendString([]byte(`{"key":`), key)
			v, found, err := e.StateGet(call.Session, gjson.GetBytes(call.Arguments, "plugin").Str, key)
			if err != nil {
				return nil, err
			}
			if found {
				out = append(out, `,"found":true,"value":`...)
				return append(append(out, v...), '}'), nil
			}
			return append(out, `,"found":false}`...), nil
		}}
}

func stateSet(e Engine) toolbox.Builtin {
	return toolbox.Builtin{Name: "state_set", Admin: true,
		Description: "Stores a JSON value in the calling session's rule state (of a plugin's rules, with plugin).",
		Schema:      `{"type":"object","properties":{"key":{"type":"string","minLength":1,"maxLength":1024},"value":{},"plugin":{"type":"string","minLength":1}},"required":["key","value"],"additionalProperties":false}`,
		Run: func(_ context.Context, call toolbox.Call) ([]byte, error) {
			key := gjson.GetBytes(call.Arguments, "key").Str
			value := gjson.GetBytes(call.Arguments, "value").Raw
			if err := e.StateSet(call.Session, gjson.GetBytes(call.Arguments, "plugin").Str, key, []byte(value)); err != nil {
				return nil, err
			}
			return append(protocol.AppendString([]byte(`{"key":`), key), `,"stored":true}`...), nil
		}}
}
