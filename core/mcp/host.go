package mcp

import (
	"context"
	"encoding/json"

	"github.com/clara-lib/clara/core/protocol"
	"github.com/clara-lib/clara/core/toolbox"
)

// ProtocolVersion is the newest MCP revision this package speaks: the
// stateless 2026-07-28 (server/discover, the client's version and
// capabilities in each request's _meta, input_required results in place
// of server-initiated requests). Servers also serve the revisions before
// it, negotiated per client (2025-11-25's initialize handshake and
// sessions); the client asks for this one first and falls back to the
// handshake when a server does not know it.
const ProtocolVersion = "2026-07-28"

// LegacyProtocolVersion is the newest revision of the initialize
// handshake.
const LegacyProtocolVersion = "2025-11-25"

// ProgressFunc reports a running call's progress: done units of total
// (total 0 when unknown) and an optional message for people.
type ProgressFunc func(done, total float64, message string)

// ToolInfo is what tools/list shows of one tool. The engine builds it from
// its descriptors (InfoFromDescriptor does it for the fields toolbox has).
type ToolInfo struct {
	Name        string
	Title       string // display name; optional
	Description string
	// InputSchema is the JSON Schema of the arguments: nil, {} or a schema
	// without "type" are served as an object schema.
	InputSchema json.RawMessage
	// OutputSchema, when set, is the JSON Schema of the tool's JSON object
	// result; results then always carry structuredContent.
	OutputSchema json.RawMessage
	Capabilities []string // toolbox.Cap*: they become the annotations
	Idempotent   bool     // calling twice with the same arguments changes nothing more
	// Annotations are the hints the tool declares, in place of those its
	// capabilities give; nil when it declares none.
	Annotations *toolbox.Annotations
	// ReturnsContent: the tool's results are MCP content blocks
	// (toolbox.ReturnsContent), served as the result's content.
	ReturnsContent bool
}

// InfoFromDescriptor is the ToolInfo of a descriptor.
func InfoFromDescriptor(d *toolbox.Descriptor) ToolInfo {
	return ToolInfo{
		Name:         d.Name,
		Title:        d.Title,
		Description:  d.Description,
		InputSchema:  d.InputSchema,
		OutputSchema: d.OutputSchema,
		Capabilities: d.Capabilities,
		Idempotent:   d.Idempotent,
		Annotations:  d.Annotations,

		ReturnsContent: d.Returns == toolbox.ReturnsContent,
	}
}

// Host is what the MCP server reaches of the engine.
type Host interface {
	// Tools lists the tools to serve: llm_visible and allowed by the
	// server's policy. It is called from one goroutine of the server at a
	// time, at NewServer and after each OnToolsChanged signal. The server
	// keeps the slices it is given (schemas included): the host must not
	// modify them afterwards.
	Tools() []ToolInfo

	// Call runs one tool call through the engine's whole pipeline (policy,
	// rules, validation, limits, audit) in session, and returns the result
	// as the JSON value of a success envelope's "result" (a JSON string for
	// tools returning text), or the error. It is called concurrently from
	// many goroutines. args is what the client sent as arguments ({} when
	// it sent none or null): valid JSON as far as the SDK decoded it, but
	// any value, at any depth, spaced or not; the host checks it. It is
	// owned by the server, valid until Call returns; the returned bytes are the server's afterwards
	// and must not alias memory the host reuses. ctx is cancelled when the
	// client cancels the call (notifications/cancelled), when its session
	// ends and on Stop. progress is nil unless the client asked for
	// progress; it may be called from any goroutine until Call returns
	// (later calls are ignored), blocks while the notification is written,
	// and drops values that do not increase.
	Call(ctx context.Context, session, name string, args []byte, progress ProgressFunc) ([]byte, *protocol.Error)

	// OnToolsChanged arranges for fn to run after every change of the tools
	// Tools would return (registration, removal, policy). fn returns at once
	// without calling back into the host, so it may run under the host's
	// registry lock and on any goroutine. The returned stop ends it; fn is
	// not called once stop has returned.
	OnToolsChanged(fn func()) (stop func())
}
