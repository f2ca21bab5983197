package tools

import (
	"context"
	"strconv"
	"time"

	"github.com/tidwall/gjson"

	"github.com/clara-lib/clara/core/protocol"
	"github.com/clara-lib/clara/core/toolbox"
)

// asyncMaxWaitMS bounds async_result's wait_ms: ten minutes.
const asyncMaxWaitMS = 600000

func asyncResult(a Async) toolbox.Builtin {
	return toolbox.Builtin{Name: "async_result",
		Description:    "Collects the answer of an asynchronous call: its envelope once finished (the handle is then spent), or {\"status\":\"pending\",\"handle\":N} if it is not finished after wait_ms.",
		Schema:         `{"type":"object","properties":{"handle":{"type":"integer","minimum":1},"wait_ms":{"type":"integer","minimum":0,"maximum":` + strconv.Itoa(asyncMaxWaitMS) + `}},"required":["handle"],"additionalProperties":false}`,
		MaxOutputBytes: 64 << 20,
		Run: func(ctx context.Context, call toolbox.Call) ([]byte, error) {
			h := gjson.GetBytes(call.Arguments, "handle").Int()
			wait := time.Duration(gjson.GetBytes(call.Arguments, "wait_ms").Int()) * time.Millisecond
			env, done, err := a.Wait(ctx, h, wait)
			if err != nil {
				return nil, protocol.Errorf(protocol.InvalidArgs, "async_result: %v", err)
			}
			if !done {
				out := strconv.AppendInt([]byte(`{"status":"pending","handle":`), h, 10)
				return append(out, '}'), nil
			}
			return env, nil
		}}
}

func asyncCancel(a Async) toolbox.Builtin {
	return toolbox.Builtin{Name: "async_cancel",
		Description: "Cancels an asynchronous call: its answer becomes tool_failed (cancelled) at once; a host tool already running finishes and its result is discarded.",
		Schema:      `{"type":"object","properties":{"handle":{"type":"integer","minimum":1}},"required":["handle"],"additionalProperties":false}`,
		Run: func(_ context.Context, call toolbox.Call) ([]byte, error) {
			h := gjson.GetBytes(call.Arguments, "handle").Int()
			if err := a.Cancel(h); err != nil {
				return nil, protocol.Errorf(protocol.InvalidArgs, "async_cancel: %v", err)
			}
			out := strconv.AppendInt([]byte(`{"handle":`), h, 10)
			return append(out, `,"cancelled":true}`...), nil
		}}
}
