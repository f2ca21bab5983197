package tools

import (
	"context"
	"encoding/json"

	"github.com/clara-lib/clara/core/protocol"
	"github.com/clara-lib/clara/core/toolbox"
)

func emitEvent(e Engine) toolbox.Builtin {
	return toolbox.Builtin{Name: "emit_event",
		Description:    "Emits an event to the rule engine in the calling session and returns what fired.",
		Schema:         `{"type":"object","properties":{"event":{"type":"string"},"payload":{"type":"object"},"trace":{"type":"boolean"}},"required":["event"],"additionalProperties":false}`,
		MaxOutputBytes: 16 << 20,
		Run: func(ctx context.Context, call toolbox.Call) ([]byte, error) {
			var a struct {
				Event   string         `json:"event"`
				Payload map[string]any `json:"payload"`
				Trace   bool           `json:"trace"`
			}
			if err := json.Unmarshal(call.Arguments, &a); err != nil {
				return nil, protocol.Errorf(protocol.InvalidArgs, "emit_event: %v", err)
			}
			out, err := e.Emit(ctx, call.Session, a.Event, a.Payload, a.Trace)
			if err != nil {
				return nil, asInvalidArgs(err)
			}
			return out, nil
		}}
}
