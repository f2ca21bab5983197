package tools

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/tidwall/gjson"

	"github.com/clara-lib/clara/core/protocol"
	"github.com/clara-lib/clara/core/toolbox"
)

// Catalog formats of tools_list.
const (
	FormatClara     = "clara"
	FormatOpenAI    = "openai"
	FormatAnthropic = "anthropic"
	FormatMCP       = "mcp"
)

// emptyObjectSchema stands in for a tool without a schema in the LLM
// formats, which all require an object schema.
var emptyObjectSchema = json.RawMessage(`{"type":"object","properties":{}}`)

// llmSchema gives a tool's schema in the form the LLM formats require: an
// object schema with "type": "object" at the top.
func llmSchema(t *toolbox.Tool) json.RawMessage {
	s := t.InputSchema
	switch string(s) {
	case "", "true", "{}":
		return emptyObjectSchema
	case "false":
		return json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false}`)
	}
	var m map[string]any
	if json.Unmarshal(s, &m) != nil {
		return emptyObjectSchema
	}
	if _, ok := m["type"]; ok {
		return json.RawMessage(s)
	}
	m["type"] = "object" // arguments are always an object
	out, _ := json.Marshal(m)
	return out
}

// Catalog renders the tools allowed by scope (only llm_visible ones when
// llmOnly) in one of the formats, sorted by name.
func Catalog(reg *toolbox.Registry, scope toolbox.Scope, format string, llmOnly bool) ([]byte, error) {
	type openaiFunction struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	}
	type openaiTool struct {
		Type     string         `json:"type"`
		Function openaiFunction `json:"function"`
	}
	type anthropicTool struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"input_schema"`
	}
	type mcpTool struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"inputSchema"`
	}
	type claraTool struct {
		toolbox.Descriptor
		Builtin bool `json:"builtin"`
	}
	switch format {
	case FormatClara, FormatOpenAI, FormatAnthropic, FormatMCP:
	default:
		return nil, protocol.Errorf(protocol.InvalidArgs, "tools_list: unknown format %q (clara, openai, anthropic, mcp)", format)
	}
	list := []any{}
	for _, t := range reg.List() {
		if !scope.Allows(t.Name) || (llmOnly && !t.LLMVisible) {
			continue
		}
		switch format {
		case FormatClara:
			d := t.Descriptor
			if d.Capabilities == nil {
				d.Capabilities = []string{}
			}
			list = append(list, claraTool{Descriptor: d, Builtin: t.Builtin})
		case FormatOpenAI:
			list = append(list, openaiTool{Type: "function", Function: openaiFunction{t.Name, t.Description, llmSchema(t)}})
		case FormatAnthropic:
			list = append(list, anthropicTool{t.Name, t.Description, llmSchema(t)})
		case FormatMCP:
			list = append(list, mcpTool{t.Name, t.Description, llmSchema(t)})
		}
	}
	return json.Marshal(struct {
		Format string `json:"format"`
		Tools  []any  `json:"tools"`
	}{format, list})
}

func toolsList(reg *toolbox.Registry) (*toolbox.Tool, error) {
	return builtinMaxOut(16<<20, "tools_list",
		"Lists the tools this call may use, as Clara descriptors or in OpenAI, Anthropic or MCP format.",
		`{"type":"object","properties":{"format":{"enum":["clara","openai","anthropic","mcp"]},"llm_visible_only":{"type":"boolean"}},"additionalProperties":false}`,
		false,
		func(_ context.Context, call toolbox.Call) ([]byte, error) {
			format := gjson.GetBytes(call.Arguments, "format").Str
			if format == "" {
				format = FormatClara
			}
			// A catalog in an LLM's format is for an LLM: by default it holds
			// only the tools an LLM may see (SPEC §6.5).
			llmOnly := format != FormatClara
			if v := gjson.GetBytes(call.Arguments, "llm_visible_only"); v.Exists() {
				llmOnly = v.Bool()
			}
			return Catalog(reg, call.Scope, format, llmOnly)
		})
}

func auditTail(a *toolbox.Audit) (*toolbox.Tool, error) {
	// Room for the whole ring: a record is at most about 200 bytes plus its
	// session name.
	return builtinMaxOut(4<<20, "audit_tail",
		fmt.Sprintf("The last N audit records (default 20, at most %d): time, session, tool, SHA-256 of the arguments, duration, status.", toolbox.AuditRingSize),
		fmt.Sprintf(`{"type":"object","properties":{"n":{"type":"integer","minimum":1,"maximum":%d}},"additionalProperties":false}`, toolbox.AuditRingSize),
		false,
		func(_ context.Context, call toolbox.Call) ([]byte, error) {
			n := 20
			if v := gjson.GetBytes(call.Arguments, "n"); v.Exists() {
				n = int(v.Int())
			}
			out := []byte(`{"records":[`)
			for i, r := range a.Tail(n) {
				if i > 0 {
					out = append(out, ',')
				}
				out = r.AppendJSON(out)
			}
			return append(out, "]}"...), nil
		})
}

func sessionPolicy(sp SessionPolicies) (*toolbox.Tool, error) {
	return builtin("session_policy",
		"Narrows the calling session's tool policy (it can never be widened again) and returns it.",
		`{"type":"object","properties":{"allow":{"type":"array","items":{"type":"string"}},"deny":{"type":"array","items":{"type":"string"}}},"additionalProperties":false}`,
		false,
		func(_ context.Context, call toolbox.Call) ([]byte, error) {
			p, err := toolbox.ParsePolicy(call.Arguments, "")
			if err != nil {
				return nil, protocol.Errorf(protocol.InvalidArgs, "session_policy: %v", err)
			}
			cur := sp.NarrowSessionPolicy(call.Session, p)
			allow, deny := cur.Lists()
			return json.Marshal(struct {
				Session string   `json:"session"`
				Allow   []string `json:"allow"`
				Deny    []string `json:"deny"`
			}{call.Session, allow, nonNil(deny)})
		})
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
