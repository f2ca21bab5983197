package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clara-lib/clara/core/toolbox"
)

// objectSchemaJSON is the schema of a tool that declares none: MCP requires
// an object schema, and Clara's arguments are always an object.
var objectSchemaJSON = json.RawMessage(`{"type":"object"}`)

// servedTool is one tool as the server publishes it.
type servedTool struct {
	tool       *sdk.Tool
	structured bool   // an output schema is declared: results must carry structuredContent
	content    bool   // results are content blocks
	key        string // the tool's JSON, to see whether it changed
}

// newServedTool turns a ToolInfo into the SDK's tool. An input schema that
// cannot describe an object is an error (no call could pass it); an output
// schema that does not describe an object is left out, with a warning.
func newServedTool(info ToolInfo) (*servedTool, string, error) {
	if !toolbox.ValidName(info.Name) {
		return nil, "", fmt.Errorf("invalid tool name %q", info.Name)
	}
	in, err := objectSchema(info.InputSchema)
	if err != nil {
		return nil, "", fmt.Errorf("tool %q: input schema: %v", info.Name, err)
	}
	t := &sdk.Tool{
		Name:        info.Name,
		Title:       info.Title,
		Description: info.Description,
		InputSchema: in,
		Annotations: annotations(info),
	}
	var warning string
	st := &servedTool{tool: t, content: info.ReturnsContent}
	if len(bytes.TrimSpace(info.OutputSchema)) > 0 {
		if out, err := declaredObjectSchema(info.OutputSchema); err != nil {
			warning = fmt.Sprintf("tool %q: output schema left out: %v", info.Name, err)
		} else {
			t.OutputSchema = out
			st.structured = true
		}
	}
	key, err := json.Marshal(t)
	if err != nil {
		return nil, "", fmt.Errorf("tool %q: %v", info.Name, err)
	}
	st.key = string(key)
	return st, warning, nil
}

// objectSchema returns a schema MCP accepts as an inputSchema: an object
// whose "type" is "object". A missing schema, {}, true or a schema without
// "type" get "type":"object" (Clara's arguments are always an object); a
// type list that allows objects is narrowed to "object"; any other type
// is an error.
func objectSchema(raw json.RawMessage) (json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) || bytes.Equal(raw, []byte("true")) {
		return objectSchemaJSON, nil
	}
	m, err := decodeSchema(raw)
	if err != nil {
		return nil, err
	}
	switch typ := m["type"].(type) {
	case nil:
		if _, present := m["type"]; present {
			return nil, errors.New(`"type" is null`)
		}
		m["type"] = "object"
	case string:
		if typ != "object" {
			return nil, fmt.Errorf("type %q cannot describe the arguments, which are an object", typ)
		}
		return bytes.Clone(raw), nil
	case []any:
		found := false
		for _, x := range typ {
			found = found || x == "object"
		}
		if !found {
			return nil, errors.New("its type list does not allow an object, and the arguments are one")
		}
		m["type"] = "object"
	default:
		return nil, errors.New(`"type" is neither a string nor a list`)
	}
	return json.Marshal(m)
}

// declaredObjectSchema accepts an output schema only when it says it
// describes an object: structuredContent is a JSON object.
func declaredObjectSchema(raw json.RawMessage) (json.RawMessage, error) {
	m, err := decodeSchema(bytes.TrimSpace(raw))
	if err != nil {
		return nil, err
	}
	if m["type"] != "object" {
		return nil, errors.New(`it does not have "type":"object" (structuredContent is an object)`)
	}
	return bytes.Clone(bytes.TrimSpace(raw)), nil
}

func decodeSchema(raw []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // keep numbers as written
	var m map[string]any
	if err := dec.Decode(&m); err != nil || m == nil {
		return nil, errors.New("not a JSON object")
	}
	if dec.More() {
		return nil, errors.New("data after the JSON object")
	}
	return m, nil
}

// annotations are the tool's hints (toolbox.Descriptor.Hints): those it
// declares, the others derived from its capabilities (a tool that declares
// none, or only fs_read, is read-only; fs_write and exec are destructive;
// network is an open world). MCP's defaults for the two pointer hints are
// true, so they are always sent.
func annotations(info ToolInfo) *sdk.ToolAnnotations {
	h := (&toolbox.Descriptor{Capabilities: info.Capabilities, Idempotent: info.Idempotent, Annotations: info.Annotations}).Hints()
	a := &sdk.ToolAnnotations{ReadOnlyHint: h.ReadOnly, IdempotentHint: h.Idempotent}
	if !h.ReadOnly {
		a.DestructiveHint = &h.Destructive
	}
	a.OpenWorldHint = &h.OpenWorld
	return a
}
