package mcp

import (
	"context"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clara-lib/clara/core/logging"
)

// ClientLogFunc sends a message of a running tool to the MCP client that
// called it, as notifications/message at level (debug, info, warning or
// error), logger the tool's name. The client receives it when it set a
// level (logging/setLevel) at or below that one; otherwise, and once the
// call has returned, nothing is sent. Safe for concurrent use.
type ClientLogFunc func(level, message string)

type clientLogKey struct{}

// withClientLog gives the context of a tools/call the way to its client's
// log (ClientLogOf).
func withClientLog(ctx context.Context, ss *sdk.ServerSession, tool string, log *logging.Logger) context.Context {
	if ss == nil {
		return ctx
	}
	send := func(level, message string) {
		defer func() {
			if r := recover(); r != nil {
				logPanic(log, "a log notification", r)
			}
		}()
		if ctx.Err() != nil {
			return // the call has returned, or was cancelled
		}
		err := ss.Log(ctx, &sdk.LoggingMessageParams{Level: sdk.LoggingLevel(level), Logger: tool, Data: message})
		if err != nil {
			logf(log, logging.Debug, "log notification not sent: %v", err)
		}
	}
	return context.WithValue(ctx, clientLogKey{}, ClientLogFunc(send))
}

// ClientLogOf is the client log of the tools/call ctx belongs to (Host.Call's
// context and those made from it); nil when the call did not come from an
// MCP client.
func ClientLogOf(ctx context.Context) ClientLogFunc {
	f, _ := ctx.Value(clientLogKey{}).(ClientLogFunc)
	return f
}
