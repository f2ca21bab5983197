package tools

import (
	"context"
	"encoding/json"

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

// LLMSchema gives a tool's schema in the form the LLM formats require: an
// object schema with "type": "object" at the top.
func LLMSchema(t *toolbox.Tool) json.RawMessage {
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

// StrictSchema reports whether schema meets OpenAI's strict mode, so that
// the catalog can say "strict": true: every object closed
// (additionalProperties false) with every property required, all the way
// down through properties and array items.
func StrictSchema(schema json.RawMessage) bool {
	var m map[string]any
	if json.Unmarshal(schema, &m) != nil {
		return false
	}
	return strictNode(m, 0)
}

func strictNode(m map[string]any, depth int) bool {
	if depth > 32 {
		return false
	}
	if items, ok := m["items"].(map[string]any); ok && !strictNode(items, depth+1) {
		return false
	}
	props, hasProps := m["properties"].(map[string]any)
	if m["type"] != "object" && !hasProps {
		return true
	}
	if open, isBool := m["additionalProperties"].(bool); !isBool || open {
		return false
	}
	required := map[string]bool{}
	list, _ := m["required"].([]any)
	for _, r := range list {
		if s, ok := r.(string); ok {
			required[s] = true
		}
	}
	for name, p := range props {
		sub, ok := p.(map[string]any)
		if !required[name] || !ok || !strictNode(sub, depth+1) {
			return false
		}
	}
	return true
}

// Catalog renders the tools allowed by scope (only llm_visible ones when
// llmOnly) in one of the formats, sorted by name.
func Catalog(reg *toolbox.Registry, scope toolbox.Scope, format string, llmOnly bool) ([]byte, error) {
	type openaiFunction struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
		Strict      bool            `json:"strict,omitempty"`
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
	type mcpAnnotations struct {
		ReadOnlyHint    bool  `json:"readOnlyHint"`
		DestructiveHint *bool `json:"destructiveHint,omitempty"`
		IdempotentHint  bool  `json:"idempotentHint"`
		OpenWorldHint   bool  `json:"openWorldHint"`
	}
	type mcpTool struct {
		Name         string          `json:"name"`
		Title        string          `json:"title,omitempty"`
		Description  string          `json:"description"`
		InputSchema  json.RawMessage `json:"inputSchema"`
		OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
		Annotations  mcpAnnotations  `json:"annotations"`
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
		if !scope.Allows(t.Name) || (llmOnly && !t.LLMVisible) || !t.CanAnswer() {
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
			schema := LLMSchema(t)
			list = append(list, openaiTool{Type: "function", Function: openaiFunction{t.Name, t.Description, schema, StrictSchema(schema)}})
		case FormatAnthropic:
			list = append(list, anthropicTool{t.Name, t.Description, LLMSchema(t)})
		case FormatMCP:
			h := t.Hints()
			a := mcpAnnotations{ReadOnlyHint: h.ReadOnly, IdempotentHint: h.Idempotent, OpenWorldHint: h.OpenWorld}
			if !h.ReadOnly {
				a.DestructiveHint = &h.Destructive
			}
			list = append(list, mcpTool{t.Name, t.Title, t.Description, LLMSchema(t), t.OutputSchema, a})
		}
	}
	return json.Marshal(struct {
		Format string `json:"format"`
		Tools  []any  `json:"tools"`
	}{format, list})
}

func toolsList(reg *toolbox.Registry) toolbox.Builtin {
	return toolbox.Builtin{Name: "tools_list",
		Description:    "Lists the tools this call may use, as Clara descriptors or in OpenAI, Anthropic or MCP format.",
		Schema:         `{"type":"object","properties":{"format":{"enum":["clara","openai","anthropic","mcp"]},"llm_visible_only":{"type":"boolean"}},"additionalProperties":false}`,
		MaxOutputBytes: 16 << 20,
		Run: func(_ context.Context, call toolbox.Call) ([]byte, error) {
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
		}}
}
