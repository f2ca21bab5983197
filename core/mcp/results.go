package mcp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clara-lib/clara/core/protocol"
)

// metaErrorCode is the _meta key of an isError result that names Clara's
// error code (denied, invalid_args, timeout…), for programs; people and
// models read the text.
const metaErrorCode = "clara/error"

// errorResult is a Clara error as MCP wants tool errors: a result with
// isError and the message as text, so that a model sees it and can correct
// itself.
func errorResult(perr *protocol.Error) *sdk.CallToolResult {
	return &sdk.CallToolResult{
		Meta:    sdk.Meta{metaErrorCode: string(perr.Code)},
		Content: []sdk.Content{&sdk.TextContent{Text: perr.Message}},
		IsError: true,
	}
}

// successResult turns the JSON value of a Clara result into an MCP result:
// a JSON string becomes its text; an object is also the structuredContent;
// anything else is its JSON text. A tool with an output schema must return
// an object.
func successResult(name string, out []byte, structured bool) *sdk.CallToolResult {
	out = bytes.TrimSpace(out)
	res := &sdk.CallToolResult{}
	switch {
	case len(out) > 0 && out[0] == '"':
		var s string
		if json.Unmarshal(out, &s) != nil {
			s = string(out)
		}
		res.Content = []sdk.Content{&sdk.TextContent{Text: s}}
	case len(out) > 0 && out[0] == '{':
		res.Content = []sdk.Content{&sdk.TextContent{Text: string(out)}}
		res.StructuredContent = json.RawMessage(out)
		return res
	default:
		if len(out) == 0 {
			out = []byte("null")
		}
		res.Content = []sdk.Content{&sdk.TextContent{Text: string(out)}}
	}
	if structured {
		return errorResult(protocol.Errorf(protocol.ToolFailed,
			"tool %q declares an output schema but returned no JSON object", name))
	}
	return res
}

// contentResult is the result of a tool that returns content blocks (the
// toolbox checked them): the blocks are the result's content.
func contentResult(name string, out []byte) *sdk.CallToolResult {
	var res sdk.CallToolResult
	body := append(append([]byte(`{"content":`), bytes.TrimSpace(out)...), '}')
	if err := json.Unmarshal(body, &res); err != nil {
		return errorResult(protocol.Errorf(protocol.ToolFailed, "tool %q returned content blocks MCP does not take: %v", name, err))
	}
	if res.Content == nil {
		res.Content = []sdk.Content{}
	}
	return &res
}

// claraResult turns a remote tool's MCP result into a Clara result (JSON):
// its structuredContent whenever it has one; for a tool with an output
// schema (hasSchema) and none, the JSON of its text (an older server may
// put it there only); otherwise the text of its content blocks, one a
// line (a block that is not text written as its JSON), as a JSON string.
// isError becomes tool_failed with the text as message.
func claraResult(server, tool string, res *sdk.CallToolResult, hasSchema bool) ([]byte, error) {
	if res == nil {
		return nil, protocol.Errorf(protocol.ToolFailed, "mcp server %q: tool %q returned no result", server, tool)
	}
	if res.IsError {
		msg := strings.TrimSpace(contentText(res.Content))
		if msg == "" {
			msg = "the tool reported an error"
		}
		return nil, &protocol.Error{Code: protocol.ToolFailed, Message: msg}
	}
	if res.StructuredContent != nil {
		b, err := json.Marshal(res.StructuredContent)
		if err != nil {
			return nil, protocol.Errorf(protocol.ToolFailed, "mcp server %q: tool %q: structuredContent: %v", server, tool, err)
		}
		return b, nil
	}
	if hasSchema {
		text := strings.TrimSpace(contentText(res.Content))
		if json.Valid([]byte(text)) {
			return []byte(text), nil
		}
		return nil, protocol.Errorf(protocol.ToolFailed, "mcp server %q: tool %q declares an output schema but returned no structuredContent", server, tool)
	}
	return protocol.AppendString(nil, contentText(res.Content)), nil
}

// contentText joins content blocks, one a line: text as it is, other
// blocks (images, resources) as their JSON.
func contentText(cs []sdk.Content) string {
	var b strings.Builder
	for i, c := range cs {
		if i > 0 {
			b.WriteByte('\n')
		}
		if t, ok := c.(*sdk.TextContent); ok {
			b.WriteString(t.Text)
			continue
		}
		j, err := json.Marshal(c)
		if err != nil {
			fmt.Fprintf(&b, "[%T]", c)
			continue
		}
		b.Write(j)
	}
	return b.String()
}
