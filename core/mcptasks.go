package core

import (
	"context"
	"errors"
	"time"

	"github.com/clara-lib/clara/core/async"
	"github.com/clara-lib/clara/core/mcp"
)

// MCP tasks (the io.modelcontextprotocol/tasks extension, core/mcp's
// tasks.go) run as asynchronous calls in a table of their own (e.tasks,
// core/async, under the [async] limits): a host's clara_async_take and
// clara_wait never see them, and an MCP client never sees the host's.

var _ mcp.BackgroundHost = mcpHost{}

// taskAfter maps mcp.task_after_ms (0: never) to the server's option.
func taskAfter(ms int) time.Duration {
	if ms == 0 {
		return -1
	}
	return time.Duration(ms) * time.Millisecond
}

// Background runs a task's call in the tasks' table, with ctx's values
// (the client's log, its user and model) but not its end: the task
// outlives the request that made it.
func (h mcpHost) Background(ctx context.Context, tool string, run func(ctx context.Context) []byte) (int64, error) {
	handle, err := h.e.tasks.Submit(context.WithoutCancel(ctx), async.Call{Tool: tool,
		Run: async.RunFunc(func(ctx context.Context, _ int64) []byte { return run(ctx) })})
	if errors.Is(err, async.ErrBusy) {
		return 0, errors.New("too many calls run in the background (async.max_running): try again later")
	}
	return handle, err
}

// Collect waits for a task's call.
func (h mcpHost) Collect(ctx context.Context, handle int64, timeout time.Duration) ([]byte, bool, error) {
	return h.e.tasks.Wait(ctx, handle, timeout)
}

// CancelBackground cancels a task's call.
func (h mcpHost) CancelBackground(handle int64) error { return h.e.tasks.Cancel(handle) }
