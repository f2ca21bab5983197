package toolbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/clara-lib/clara/core/protocol"
)

// ValueSchema is a JSON Schema for a value that is not a tool's arguments:
// a chat's result_schema, which types what the model hands back with
// set_result. The zero of *ValueSchema (nil) accepts every value.
type ValueSchema struct {
	what   string // how messages name the schema: "result_schema"
	schema *jsonschema.Schema
}

// CompileValueSchema compiles schema (a JSON object; draft 2020-12 unless
// $schema says otherwise; no external $ref). what names it in errors. {}
// compiles to nil, which accepts everything.
func CompileValueSchema(what string, schema []byte) (*ValueSchema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		return nil, fmt.Errorf("%s is not JSON: %v", what, err)
	}
	m, ok := doc.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s must be a JSON Schema object", what)
	}
	if len(m) == 0 {
		return nil, nil
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	loc := "clara:value/" + what + ".json"
	if err := c.AddResource(loc, doc); err != nil {
		return nil, fmt.Errorf("invalid %s: %s", what, schemaProblems(err))
	}
	s, err := c.Compile(loc)
	if err != nil {
		return nil, fmt.Errorf("invalid %s: %s", what, schemaProblems(err))
	}
	return &ValueSchema{what: what, schema: s}, nil
}

// Check validates value (JSON text) and returns nil or an invalid_args
// error whose Details list every violation ([{pointer, message}], the
// pointer into value).
func (v *ValueSchema) Check(value []byte) *protocol.Error {
	if v == nil {
		return nil
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(value))
	if err != nil {
		return protocol.Errorf(protocol.InvalidArgs, "the value is not JSON: %v", err)
	}
	err = v.schema.Validate(inst)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return protocol.Errorf(protocol.InvalidArgs, "the value does not match %s: %s", v.what, oneLine(err))
	}
	var vs []Violation
	leaves(ve, &vs)
	sortViolations(vs)
	if len(vs) == 0 {
		vs = append(vs, Violation{Message: oneLine(err)})
	}
	details, _ := json.Marshal(vs)
	msg := fmt.Sprintf("the value does not match %s: %s: %s", v.what, pointerText(vs[0].Pointer), vs[0].Message)
	if len(vs) > 1 {
		msg += fmt.Sprintf(" (and %d more)", len(vs)-1)
	}
	return &protocol.Error{Code: protocol.InvalidArgs, Message: msg, Details: details}
}
