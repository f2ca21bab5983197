package toolbox

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"

	"github.com/clara-lib/clara/core/protocol"
)

// maxResultDepth bounds the nesting of a JSON result a tool hands back.
const maxResultDepth = 10000

// Invoke runs one call of t and returns its result as a JSON value, or a
// protocol error. A panic inside the tool is recovered here and becomes an
// internal error whose cause carries the stack (for the log, never the
// envelope). Results of tools that are not built in are checked: text that
// is not JSON is tool_failed, never passed on.
func Invoke(ctx context.Context, t *Tool, call Call) (result []byte, perr *protocol.Error) {
	defer func() {
		if r := recover(); r != nil {
			result = nil
			perr = protocol.InternalError(fmt.Errorf("panic in tool %q: %v\n%s", t.Name, r, debug.Stack()))
		}
	}()
	out, err := t.Run(ctx, call)
	if err != nil {
		return nil, classify(ctx, t, err)
	}
	if t.Returns == ReturnsString {
		return protocol.AppendString(make([]byte, 0, len(out)+2), string(out)), nil
	}
	if len(out) == 0 {
		return []byte("null"), nil
	}
	if t.Builtin {
		return out, nil
	}
	sc, serr := protocol.Scan(out, maxResultDepth)
	if serr != nil {
		return nil, protocol.Errorf(protocol.ToolFailed, "tool %q returned invalid JSON: %v", t.Name, serr)
	}
	if sc.Spaced {
		return protocol.AppendCompact(nil, out[sc.Start:sc.End]), nil
	}
	return out[sc.Start:sc.End], nil
}

// classify maps a tool's error to the protocol: a *protocol.Error keeps
// its code, a missed deadline is timeout, anything else is tool_failed.
func classify(ctx context.Context, t *Tool, err error) *protocol.Error {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return pe
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return &protocol.Error{Code: protocol.Timeout, Message: fmt.Sprintf("tool %q ran past its deadline", t.Name), Cause: err}
	}
	return &protocol.Error{Code: protocol.ToolFailed, Message: err.Error(), Cause: err}
}
