package toolbox_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/clara-lib/clara/core/protocol"
	"github.com/clara-lib/clara/core/toolbox"
)

// What a descriptor declares of itself for MCP clients and agent
// frameworks (issue 27 §4): annotations checked against the capabilities,
// and an output_schema that results are held to.

func TestParseDescriptor_annotations(t *testing.T) {
	for _, c := range []struct {
		name, text string
		want       toolbox.Hints
		stored     string // the descriptor's annotations and idempotent, as tools_list writes them
	}{
		// Nothing declared: MCP's own defaults, whatever the capabilities
		// (issue 26 §3: a tool without capabilities was served read-only).
		{"none, with a capability: MCP's defaults", `{"name":"x","capabilities":["fs_write"]}`,
			toolbox.Hints{Destructive: true, OpenWorld: true}, `{}`},
		{"none, without capabilities: MCP's defaults", `{"name":"x"}`,
			toolbox.Hints{Destructive: true, OpenWorld: true}, `{}`},
		{"read-only network tool", `{"name":"x","capabilities":["network"],"annotations":{"readOnlyHint":true}}`,
			toolbox.Hints{ReadOnly: true, OpenWorld: true}, `{"annotations":{"readOnlyHint":true}}`},
		{"read-only in a closed world", `{"name":"x","annotations":{"readOnlyHint":true,"openWorldHint":false}}`,
			toolbox.Hints{ReadOnly: true}, `{"annotations":{"readOnlyHint":true,"openWorldHint":false}}`},
		{"additive file writer", `{"name":"x","capabilities":["fs_write"],"annotations":{"destructiveHint":false}}`,
			toolbox.Hints{OpenWorld: true}, `{"annotations":{"destructiveHint":false}}`},
		{"a tool without capabilities that changes things", `{"name":"x","annotations":{"readOnlyHint":false}}`,
			toolbox.Hints{Destructive: true, OpenWorld: true}, `{"annotations":{"readOnlyHint":false}}`},
		{"destructive is not read-only", `{"name":"x","annotations":{"destructiveHint":true}}`,
			toolbox.Hints{Destructive: true, OpenWorld: true}, `{"annotations":{"destructiveHint":true}}`},
		{"open world without network", `{"name":"x","annotations":{"openWorldHint":true}}`,
			toolbox.Hints{Destructive: true, OpenWorld: true}, `{"annotations":{"openWorldHint":true}}`},
		{"idempotentHint is idempotent", `{"name":"x","annotations":{"idempotentHint":true}}`,
			toolbox.Hints{Destructive: true, OpenWorld: true, Idempotent: true}, `{"idempotent":true}`},
		{"both agree", `{"name":"x","idempotent":true,"annotations":{"idempotentHint":true,"openWorldHint":false}}`,
			toolbox.Hints{Destructive: true, Idempotent: true}, `{"idempotent":true,"annotations":{"openWorldHint":false}}`},
		{"title is the descriptor's", `{"name":"x","annotations":{"title":"X","readOnlyHint":true}}`,
			toolbox.Hints{ReadOnly: true, OpenWorld: true}, `{"annotations":{"readOnlyHint":true}}`},
		{"null", `{"name":"x","annotations":null}`, toolbox.Hints{Destructive: true, OpenWorld: true}, `{}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, err := toolbox.ParseDescriptor([]byte(c.text))
			if err != nil {
				t.Fatal(err)
			}
			if got := d.Hints(); got != c.want {
				t.Errorf("Hints = %+v, want %+v", got, c.want)
			}
			b, _ := json.Marshal(struct {
				Idempotent  bool                 `json:"idempotent,omitempty"`
				Annotations *toolbox.Annotations `json:"annotations,omitempty"`
			}{d.Idempotent, d.Annotations})
			if string(b) != c.stored {
				t.Errorf("stored %s, want %s", b, c.stored)
			}
			// NewTool keeps the same, and does not share the caller's.
			tl := mkTool(t, d, toolbox.ToolOptions{})
			if tl.Hints() != c.want {
				t.Errorf("the tool's Hints = %+v, want %+v", tl.Hints(), c.want)
			}
			if d.Annotations != nil && tl.Annotations == d.Annotations {
				t.Error("the tool shares the caller's annotations")
			}
		})
	}
}

func TestParseDescriptor_annotationsRefused(t *testing.T) {
	for _, c := range []struct{ name, text, want string }{
		{"read-only file writer", `{"name":"x","capabilities":["fs_write"],"annotations":{"readOnlyHint":true}}`,
			`tool "x": annotations.readOnlyHint is true, but its capability "fs_write" changes what lies outside the tool`},
		{"read-only program runner", `{"name":"x","capabilities":["exec","fs_read"],"annotations":{"readOnlyHint":true}}`,
			`tool "x": annotations.readOnlyHint is true, but its capability "exec" changes what lies outside the tool`},
		{"read-only CLIPS writer", `{"name":"x","capabilities":["clips_write"],"annotations":{"readOnlyHint":true}}`,
			`tool "x": annotations.readOnlyHint is true, but its capability "clips_write" changes what lies outside the tool`},
		{"read-only and destructive", `{"name":"x","annotations":{"readOnlyHint":true,"destructiveHint":true}}`,
			`tool "x": annotations.readOnlyHint and destructiveHint are both true: a read-only tool destroys nothing`},
		{"closed world on the network", `{"name":"x","capabilities":["network"],"annotations":{"openWorldHint":false}}`,
			`tool "x": annotations.openWorldHint is false, but its capability "network" reaches outside`},
		{"idempotent contradicted", `{"name":"x","idempotent":true,"annotations":{"idempotentHint":false}}`,
			`tool "x": idempotent is true, but annotations.idempotentHint is false`},
		{"unknown hint", `{"name":"x","annotations":{"readonly":true}}`, `descriptor: unknown key "annotations.readonly"`},
		{"two titles", `{"name":"x","title":"Y","annotations":{"title":"X"}}`, `tool "x": title is "Y", but annotations.title is "X"`},
		{"hint a string", `{"name":"x","annotations":{"readOnlyHint":"yes"}}`, `descriptor: "annotations.readOnlyHint" must not be string`},
		{"not an object", `{"name":"x","annotations":[]}`, `descriptor: "annotations" must not be array`},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, err := toolbox.ParseDescriptor([]byte(c.text))
			if err == nil || err.Error() != c.want {
				t.Fatalf("got %v (%+v)\nwant %s", err, d, c.want)
			}
		})
	}
	// NewTool checks a descriptor built in Go the same way.
	yes := true
	_, err := toolbox.NewTool(toolbox.Descriptor{Name: "x", Capabilities: []string{"exec"}, Annotations: &toolbox.Annotations{ReadOnly: &yes}},
		toolbox.ToolOptions{Run: noRun})
	if err == nil || !strings.Contains(err.Error(), "readOnlyHint is true") {
		t.Errorf("NewTool: %v", err)
	}
}

func TestNewTool_outputSchemaCompiled(t *testing.T) {
	for _, c := range []struct{ name, schema, want string }{
		{"not a schema", `{"type":"objectx"}`,
			`tool "o": invalid output_schema: at /type: got string, want array; at /type: value must be one of 'array', 'boolean', 'integer', 'null', 'number', 'object', 'string'`},
		{"external $ref", `{"$ref":"http://example.com/s.json"}`,
			`tool "o": invalid output_schema: failing loading "http://example.com/s.json": external $ref "http://example.com/s.json" is not allowed: put shared definitions under $defs`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := toolbox.NewTool(toolbox.Descriptor{Name: "o", OutputSchema: []byte(c.schema)}, toolbox.ToolOptions{Run: noRun})
			if err == nil || err.Error() != c.want {
				t.Fatalf("got %v\nwant %s", err, c.want)
			}
			if oe := (*toolbox.OutputSchemaError)(nil); !errors.As(err, &oe) {
				t.Errorf("%T is not an OutputSchemaError", err)
			}
		})
	}
}

// TestExecute_outputSchemaEnforced: a result that does not match the
// declared output_schema fails the call with tool_failed and every
// violation, as arguments do with invalid_args.
func TestExecute_outputSchemaEnforced(t *testing.T) {
	const schema = `{"type":"object","properties":{"title":{"type":"string"},"year":{"type":"integer"}},"required":["title","year"],"additionalProperties":false}`
	for _, c := range []struct{ name, out, want string }{
		{"matches", `{"title":"Alien","year":1979}`, `{"title":"Alien","year":1979}`},
		{"matches after compaction", ` {"year": 1979, "title": "Alien"} `, `{"year":1979,"title":"Alien"}`},
		{"wrong type", `{"title":"Alien","year":"1979"}`,
			`tool_failed: tool "o": its result does not match output_schema: at /year: got string, want integer | [{"pointer":"/year","message":"got string, want integer"}]`},
		{"several", `{"title":7,"extra":1}`,
			`tool_failed: tool "o": its result does not match output_schema: at the top: additional properties 'extra' not allowed (and 2 more) | ` +
				`[{"pointer":"","message":"additional properties 'extra' not allowed"},{"pointer":"","message":"missing property 'year'"},{"pointer":"/title","message":"got number, want string"}]`},
		{"not an object", `[1]`,
			`tool_failed: tool "o": its result does not match output_schema: at the top: got array, want object | [{"pointer":"","message":"got array, want object"}]`},
		{"null", `<nil>`,
			`tool_failed: tool "o": its result does not match output_schema: at the top: got null, want object | [{"pointer":"","message":"got null, want object"}]`},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, inline := range []bool{true, false} {
				tl := mkTool(t, toolbox.Descriptor{Name: "o", OutputSchema: []byte(schema)}, toolbox.ToolOptions{Inline: inline, Run: returning(c.out, nil)})
				out, _, perr := tl.Execute(bg, args(`{}`), toolbox.Defaults{TimeoutMS: 5000})
				got := string(out)
				if perr != nil {
					got = errString(perr)
					if out != nil {
						t.Error("a result came with the error")
					}
				}
				if got != c.want {
					t.Errorf("inline=%v\n got %s\nwant %s", inline, got, c.want)
				}
			}
		})
	}
	// A tool's own failure is reported as it is, not as a schema mismatch.
	tl := mkTool(t, toolbox.Descriptor{Name: "o", OutputSchema: []byte(schema)}, toolbox.ToolOptions{Run: returning(`<nil>`, protocol.Errorf(protocol.Denied, "no"))})
	if _, _, perr := tl.Execute(bg, args(`{}`), toolbox.Defaults{TimeoutMS: 5000}); errString(perr) != "denied: no" {
		t.Errorf("got %s", errString(perr))
	}
	// {} declares nothing to check.
	tl = mkTool(t, toolbox.Descriptor{Name: "o", OutputSchema: []byte(`{}`)}, toolbox.ToolOptions{Run: returning(`5`, nil)})
	if out, _, perr := tl.Execute(bg, args(`{}`), toolbox.Defaults{TimeoutMS: 5000}); perr != nil || string(out) != "5" {
		t.Errorf("{}: %s %s", out, errString(perr))
	}
}
