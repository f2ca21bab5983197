package toolbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/clara-lib/clara/core/protocol"
)

// Capabilities a tool may declare; test mode and policy look at them.
const (
	CapNetwork = "network"
	CapFSRead  = "fs_read"
	CapFSWrite = "fs_write"
	CapExec    = "exec"
	// CapCLIPSWrite: the tool changes a CLIPS program's facts
	// (clips_assert); test mode does not stop it.
	CapCLIPSWrite = "clips_write"
)

var knownCapabilities = map[string]bool{CapNetwork: true, CapFSRead: true, CapFSWrite: true, CapExec: true, CapCLIPSWrite: true}

// Rate scopes: whose calls a rate_per_min counts.
const (
	RateScopeTool    = "tool"    // all calls of the tool
	RateScopeSession = "session" // each session separately
)

// Limits bound one tool's calls. Zero means "the configured default" for
// TimeoutMS and MaxOutputBytes, and "none" for the others.
type Limits struct {
	TimeoutMS      int    `json:"timeout_ms,omitempty"`
	RatePerMin     int    `json:"rate_per_min,omitempty"`
	RateScope      string `json:"rate_scope,omitempty"`
	MaxOutputBytes int    `json:"max_output_bytes,omitempty"`
	MaxConcurrency int    `json:"max_concurrency,omitempty"`
	// Budgets (issue 28): how many times one chat's model may call the
	// tool, and how many calls one session may make of it; 0 is the
	// configured default (limits.max_calls_per_chat, ...), which is none
	// unless set.
	MaxCallsPerChat    int `json:"max_calls_per_chat,omitempty"`
	MaxCallsPerSession int `json:"max_calls_per_session,omitempty"`
}

// Upper bounds of the limits a descriptor may set.
const (
	maxTimeoutMS      = 24 * 3600 * 1000
	maxRatePerMin     = 1_000_000
	maxOutputBytesCap = 1 << 30
	maxConcurrencyCap = 1 << 16
	maxCallsBudget    = 1_000_000_000
)

// Descriptor describes a tool to callers, to the catalog an LLM sees, and
// to the pipeline (limits, capabilities).
type Descriptor struct {
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	InputSchema  json.RawMessage `json:"input_schema,omitempty"` // compact JSON; nil accepts any object
	Returns      string          `json:"returns"`                // ReturnsJSON or ReturnsString
	Capabilities []string        `json:"capabilities"`
	Limits       Limits          `json:"limits"`
	LLMVisible   bool            `json:"llm_visible"`
	// For MCP clients and agent frameworks: a display name, the schema of
	// a JSON object result, and whether a second identical call changes
	// nothing more.
	Title        string          `json:"title,omitempty"`
	OutputSchema json.RawMessage `json:"output_schema,omitempty"` // compiled at registration; results are checked against it
	Idempotent   bool            `json:"idempotent,omitempty"`
	// Annotations are the hints the tool declares about itself, which
	// take the place of those its capabilities give (Hints); nil when it
	// declares none.
	Annotations *Annotations `json:"annotations,omitempty"`
	// OnCallerThread: a host tool that returns quickly runs on the thread
	// of the call that asked for it, with no handoff to a worker thread;
	// its timeout then cannot cut the call short (docs/tools.md).
	OnCallerThread bool `json:"on_caller_thread,omitempty"`
	// ChangesFiles names the arguments that hold paths the tool changes
	// (an argument's name, or a JSON pointer such as "/edits/0/path"):
	// after a successful call the session's file-change callbacks fire
	// for them (SPEC §9.6), as for a result's changed_files.
	ChangesFiles []string `json:"changes_files,omitempty"`
	// ReportsChangedFiles: the tool's own result says which files it
	// changed, in "changed_files" (SPEC §9.6), and the session's
	// callbacks fire for them. Only a tool that declares it is believed:
	// a result may carry what a model or an MCP client wrote (echo does).
	ReportsChangedFiles bool `json:"reports_changed_files,omitempty"`
	// NeedsApproval: a person approves calls of the tool before they run
	// (issue 28): every call, or those an on_tool_call rule matches.
	NeedsApproval *NeedsApproval `json:"needs_approval,omitempty"`
}

// NeedsApproval says which calls of a tool wait for a person's approval:
// every one ("needs_approval": true), or those the condition of the
// on_tool_call rule named Rule matches ("needs_approval": "rule-id").
type NeedsApproval struct {
	Always bool
	Rule   string
}

// MarshalJSON writes true, or the rule's id.
func (n NeedsApproval) MarshalJSON() ([]byte, error) {
	if n.Rule != "" {
		return json.Marshal(n.Rule)
	}
	return json.Marshal(n.Always)
}

// ruleIDPattern is what a rule's id may be (core/rules checks the same).
var ruleIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)

// parseNeedsApproval reads needs_approval: true, false (none), or a rule's
// id.
func parseNeedsApproval(raw json.RawMessage) (*NeedsApproval, error) {
	raw = bytes.TrimSpace(raw)
	switch string(raw) {
	case "", "null", "false":
		return nil, nil
	case "true":
		return &NeedsApproval{Always: true}, nil
	}
	var id string
	if err := json.Unmarshal(raw, &id); err != nil {
		return nil, errors.New(`"needs_approval" must be true, false or the id of an on_tool_call rule`)
	}
	if !ruleIDPattern.MatchString(id) {
		return nil, fmt.Errorf(`"needs_approval": %q is not a rule id (1 to 128 letters, digits, '_', '.' or '-')`, id)
	}
	return &NeedsApproval{Rule: id}, nil
}

// Hints are what a tool says of itself to MCP clients (annotations). Its
// capabilities give them: read-only when it declares none but fs_read,
// destructive when it writes files or runs programs, open-world when it
// reaches the network; its declared Annotations take their place.
type Hints struct {
	ReadOnly, Destructive, OpenWorld, Idempotent bool
}

// Annotations are hints a descriptor declares, in MCP's own names (its
// "annotations" object); each one left out is derived from the
// capabilities. check refuses those the capabilities contradict.
// idempotentHint is the descriptor's "idempotent": check moves it there.
type Annotations struct {
	ReadOnly    *bool `json:"readOnlyHint,omitempty"`
	Destructive *bool `json:"destructiveHint,omitempty"`
	Idempotent  *bool `json:"idempotentHint,omitempty"`
	OpenWorld   *bool `json:"openWorldHint,omitempty"`
}

// Hints gives the tool's hints: the declared ones, the others derived
// from its capabilities.
func (d *Descriptor) Hints() Hints {
	h := Hints{ReadOnly: true, Idempotent: d.Idempotent}
	for _, c := range d.Capabilities {
		h.ReadOnly = h.ReadOnly && c == CapFSRead
	}
	a := d.Annotations
	if a == nil {
		a = &Annotations{}
	}
	if a.ReadOnly != nil {
		h.ReadOnly = *a.ReadOnly
	}
	if a.Destructive != nil && *a.Destructive {
		h.ReadOnly = false // a tool that may destroy is not read-only
	}
	h.Destructive = !h.ReadOnly && (d.HasCapability(CapFSWrite) || d.HasCapability(CapExec))
	if a.Destructive != nil && !h.ReadOnly {
		h.Destructive = *a.Destructive
	}
	h.OpenWorld = d.HasCapability(CapNetwork)
	if a.OpenWorld != nil {
		h.OpenWorld = *a.OpenWorld
	}
	return h
}

// checkAnnotations refuses the declared hints the capabilities
// contradict, those that would make a client less careful than the tool
// deserves: read-only while it writes files, runs programs or changes a
// CLIPS program's facts; a closed world while it reaches the network.
// It moves idempotentHint to Idempotent.
func (d *Descriptor) checkAnnotations() error {
	a := d.Annotations
	if a == nil {
		return nil
	}
	if a.ReadOnly != nil && *a.ReadOnly {
		for _, c := range []string{CapFSWrite, CapExec, CapCLIPSWrite} {
			if d.HasCapability(c) {
				return fmt.Errorf("tool %q: annotations.readOnlyHint is true, but its capability %q changes what lies outside the tool", d.Name, c)
			}
		}
		if a.Destructive != nil && *a.Destructive {
			return fmt.Errorf("tool %q: annotations.readOnlyHint and destructiveHint are both true: a read-only tool destroys nothing", d.Name)
		}
	}
	if a.OpenWorld != nil && !*a.OpenWorld && d.HasCapability(CapNetwork) {
		return fmt.Errorf("tool %q: annotations.openWorldHint is false, but its capability \"network\" reaches outside", d.Name)
	}
	if a.Idempotent != nil {
		if d.Idempotent && !*a.Idempotent {
			return fmt.Errorf("tool %q: idempotent is true, but annotations.idempotentHint is false", d.Name)
		}
		d.Idempotent = *a.Idempotent
		a.Idempotent = nil
	}
	if *a == (Annotations{}) {
		d.Annotations = nil
	}
	return nil
}

// HasCapability reports whether the tool declares capability c.
func (d *Descriptor) HasCapability(c string) bool {
	for _, x := range d.Capabilities {
		if x == c {
			return true
		}
	}
	return false
}

// ParseDescriptor reads a descriptor in the JSON form of SPEC §6.1,
// strictly: unknown keys, wrong types and values out of range are errors
// that name the key. llm_visible defaults to true.
func ParseDescriptor(text []byte) (Descriptor, error) {
	var raw struct {
		Name         *string         `json:"name"`
		Description  *string         `json:"description"`
		InputSchema  json.RawMessage `json:"input_schema"`
		Returns      *string         `json:"returns"`
		Capabilities []string        `json:"capabilities"`
		Limits       *Limits         `json:"-"`
		LimitsRaw    json.RawMessage `json:"limits"`
		LLMVisible   *bool           `json:"llm_visible"`
		Title        *string         `json:"title"`
		OutputSchema json.RawMessage `json:"output_schema"`
		Idempotent   *bool           `json:"idempotent"`
		Annotations  json.RawMessage `json:"annotations"`
		OnCaller     *bool           `json:"on_caller_thread"`
		ChangesFiles []string        `json:"changes_files"`
		ReportsFiles *bool           `json:"reports_changed_files"`
		NeedsApprove json.RawMessage `json:"needs_approval"`
	}
	if len(bytes.TrimSpace(text)) == 0 {
		return Descriptor{}, errors.New("descriptor: empty")
	}
	if err := decodeStrict(text, &raw, ""); err != nil {
		return Descriptor{}, fmt.Errorf("descriptor: %s", err)
	}
	d := Descriptor{LLMVisible: true, Returns: ReturnsJSON}
	if raw.Name == nil {
		return Descriptor{}, errors.New("descriptor: \"name\" is missing")
	}
	d.Name = *raw.Name
	if raw.Description != nil {
		d.Description = *raw.Description
	}
	if raw.Returns != nil {
		d.Returns = *raw.Returns
	}
	if raw.LLMVisible != nil {
		d.LLMVisible = *raw.LLMVisible
	}
	if raw.Limits != nil {
		d.Limits = *raw.Limits
	}
	if len(raw.LimitsRaw) > 0 {
		if err := decodeStrict(raw.LimitsRaw, &d.Limits, "limits"); err != nil {
			return Descriptor{}, fmt.Errorf("descriptor: %s", err)
		}
	}
	d.Capabilities = raw.Capabilities
	if raw.Title != nil {
		d.Title = *raw.Title
	}
	if raw.Idempotent != nil {
		d.Idempotent = *raw.Idempotent
	}
	if raw.OnCaller != nil {
		d.OnCallerThread = *raw.OnCaller
	}
	if len(raw.Annotations) > 0 && !bytes.Equal(bytes.TrimSpace(raw.Annotations), []byte("null")) {
		d.Annotations = new(Annotations)
		if err := decodeStrict(raw.Annotations, d.Annotations, "annotations"); err != nil {
			return Descriptor{}, fmt.Errorf("descriptor: %s", err)
		}
	}
	d.ChangesFiles = raw.ChangesFiles
	na, err := parseNeedsApproval(raw.NeedsApprove)
	if err != nil {
		return Descriptor{}, fmt.Errorf("descriptor: %s", err)
	}
	d.NeedsApproval = na
	if raw.ReportsFiles != nil {
		d.ReportsChangedFiles = *raw.ReportsFiles
	}
	if len(raw.OutputSchema) > 0 && !bytes.Equal(bytes.TrimSpace(raw.OutputSchema), []byte("null")) {
		var buf bytes.Buffer
		if err := json.Compact(&buf, raw.OutputSchema); err != nil || buf.Bytes()[0] != '{' {
			return Descriptor{}, errors.New("descriptor: output_schema must be a JSON Schema object")
		}
		d.OutputSchema = buf.Bytes()
	}
	if len(raw.InputSchema) > 0 && !bytes.Equal(bytes.TrimSpace(raw.InputSchema), []byte("null")) {
		var buf bytes.Buffer
		if err := json.Compact(&buf, raw.InputSchema); err != nil {
			return Descriptor{}, fmt.Errorf("descriptor: input_schema: %v", err)
		}
		d.InputSchema = buf.Bytes()
	}
	if err := d.check(); err != nil {
		return Descriptor{}, err
	}
	return d, nil
}

// PatchLimits returns base with the limits a JSON object gives replaced
// (keys as in a descriptor's "limits"; a key not given keeps base's
// value, 0 means the default or none as in a descriptor). Unknown keys
// and wrong types are errors; bounds are checked when the tool is made.
func PatchLimits(base Limits, patch []byte) (Limits, error) {
	var p struct {
		TimeoutMS      *int    `json:"timeout_ms"`
		RatePerMin     *int    `json:"rate_per_min"`
		RateScope      *string `json:"rate_scope"`
		MaxOutputBytes *int    `json:"max_output_bytes"`
		MaxConcurrency *int    `json:"max_concurrency"`
	}
	if err := decodeStrict(patch, &p, "limits"); err != nil {
		return Limits{}, errors.New(err.Error())
	}
	l := base
	for _, f := range []struct {
		from *int
		to   *int
	}{{p.TimeoutMS, &l.TimeoutMS}, {p.RatePerMin, &l.RatePerMin}, {p.MaxOutputBytes, &l.MaxOutputBytes}, {p.MaxConcurrency, &l.MaxConcurrency}} {
		if f.from != nil {
			*f.to = *f.from
		}
	}
	if p.RateScope != nil {
		l.RateScope = *p.RateScope
	}
	return l, nil
}

// decodeStrict decodes one JSON object into v, refusing unknown keys and
// anything after the object. prefix names the object in messages ("" for
// the top level, "limits" for a member).
func decodeStrict(text []byte, v any, prefix string) error {
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return errors.New(describeJSONError(err, prefix))
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("data after the JSON object")
	}
	return nil
}

func describeJSONError(err error, prefix string) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		field := withoutIndexes(te.Field)
		if prefix != "" && field != "" {
			field = prefix + "." + field
		} else if field == "" {
			field = prefix
		}
		if field == "" {
			return fmt.Sprintf("must be a JSON object, not %s", te.Value)
		}
		return fmt.Sprintf("%q must not be %s", field, te.Value)
	}
	msg := err.Error()
	if strings.HasPrefix(msg, "json: unknown field ") {
		name, _ := strconv.Unquote(strings.TrimPrefix(msg, "json: unknown field "))
		if prefix != "" {
			name = prefix + "." + name
		}
		return fmt.Sprintf("unknown key %q", name)
	}
	return strings.TrimPrefix(msg, "json: ")
}

// withoutIndexes drops the array indexes from a JSON path ("deny.0" is "deny"): encoding/json
// names them from Go 1.27 (on json/v2) and not before, and a message should not depend on the
// Go that built the library.
func withoutIndexes(path string) string {
	if !strings.ContainsAny(path, "0123456789") {
		return path
	}
	parts := strings.Split(path, ".")
	kept := parts[:0]
	for _, p := range parts {
		if p == "" || strings.Trim(p, "0123456789") != "" {
			kept = append(kept, p)
		}
	}
	return strings.Join(kept, ".")
}

// check validates everything but the schema.
func (d *Descriptor) check() error {
	if !ValidName(d.Name) {
		return fmt.Errorf("invalid tool name %q: use 1 to 64 letters, digits, '_' or '-'", d.Name)
	}
	if d.Returns != ReturnsJSON && d.Returns != ReturnsString && d.Returns != ReturnsContent {
		return fmt.Errorf("tool %q: returns must be \"json\", \"string\" or \"content\", not %q", d.Name, d.Returns)
	}
	if d.Returns == ReturnsContent && len(d.OutputSchema) > 0 {
		return fmt.Errorf("tool %q: a tool that returns \"content\" has no output_schema (its result is content blocks, not an object)", d.Name)
	}
	seen := map[string]bool{}
	for _, c := range d.Capabilities {
		if !knownCapabilities[c] {
			return fmt.Errorf("tool %q: unknown capability %q (known: exec, fs_read, fs_write, network)", d.Name, c)
		}
		if seen[c] {
			return fmt.Errorf("tool %q: capability %q listed twice", d.Name, c)
		}
		seen[c] = true
	}
	sort.Strings(d.Capabilities)
	if err := d.checkAnnotations(); err != nil {
		return err
	}
	if _, err := compileChangesFiles(d.ChangesFiles); err != nil {
		return fmt.Errorf("tool %q: %v", d.Name, err)
	}
	l := &d.Limits
	for _, c := range []struct {
		name string
		v    int
		max  int
	}{
		{"timeout_ms", l.TimeoutMS, maxTimeoutMS},
		{"rate_per_min", l.RatePerMin, maxRatePerMin},
		{"max_output_bytes", l.MaxOutputBytes, maxOutputBytesCap},
		{"max_concurrency", l.MaxConcurrency, maxConcurrencyCap},
		{"max_calls_per_chat", l.MaxCallsPerChat, maxCallsBudget},
		{"max_calls_per_session", l.MaxCallsPerSession, maxCallsBudget},
	} {
		if c.v < 0 || c.v > c.max {
			return fmt.Errorf("tool %q: limits.%s must be from 0 to %d, not %d", d.Name, c.name, c.max, c.v)
		}
	}
	switch l.RateScope {
	case "":
		l.RateScope = RateScopeTool
	case RateScopeTool, RateScopeSession:
	default:
		return fmt.Errorf("tool %q: limits.rate_scope must be \"tool\" or \"session\", not %q", d.Name, l.RateScope)
	}
	return nil
}

// noLoader refuses every external $ref: a schema may not make Clara read
// files or the network.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("external $ref %q is not allowed: put shared definitions under $defs", url)
}

// compileSchema compiles a tool's input_schema (draft 2020-12 unless
// $schema says otherwise), and, when it uses only the keywords
// simpleSchema knows, its direct check too. A nil schema accepts any
// object.
func compileSchema(name string, schema []byte) (*jsonschema.Schema, *simpleSchema, error) {
	return compileSchemaOf(name, "input_schema", schema)
}

// compileSchemaOf is compileSchema for the descriptor's key key
// (input_schema or output_schema).
func compileSchemaOf(name, key string, schema []byte) (*jsonschema.Schema, *simpleSchema, error) {
	if schema == nil {
		return nil, nil, nil
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		return nil, nil, fmt.Errorf("tool %q: %s is not JSON: %v", name, key, err)
	}
	if m, ok := doc.(map[string]any); ok && len(m) == 0 {
		return nil, nil, nil // {} accepts everything
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	loc := "clara:tool/" + name + "/" + key + ".json"
	if err := c.AddResource(loc, doc); err != nil {
		return nil, nil, fmt.Errorf("tool %q: invalid %s: %s", name, key, schemaProblems(err))
	}
	s, err := c.Compile(loc)
	if err != nil {
		return nil, nil, fmt.Errorf("tool %q: invalid %s: %s", name, key, schemaProblems(err))
	}
	simple, _ := compileSimple(doc)
	return s, simple, nil
}

// schemaProblems lists what is wrong with a schema: each violation of the
// metaschema with its pointer into the schema, or the compiler's message.
func schemaProblems(err error) string {
	var sve *jsonschema.SchemaValidationError
	var ve *jsonschema.ValidationError
	if errors.As(err, &sve) && errors.As(sve.Err, &ve) {
		var vs []Violation
		leaves(ve, &vs)
		sortViolations(vs)
		parts := make([]string, 0, len(vs))
		for _, v := range vs {
			parts = append(parts, pointerText(v.Pointer)+": "+v.Message)
		}
		if len(parts) > 0 {
			return strings.Join(parts, "; ")
		}
	}
	return oneLine(err)
}

func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}

// Violation is one way arguments fail a schema.
type Violation struct {
	Pointer string `json:"pointer"` // JSON pointer into the arguments ("" is the whole object)
	Message string `json:"message"`
}

// validate checks arguments against s and returns an invalid_args error
// listing every violation, or nil. simple, when the schema compiled to
// one, answers for valid arguments without decoding them; everything else
// goes to s.
func validate(name string, s *jsonschema.Schema, simple *simpleSchema, args []byte, scanned bool) *protocol.Error {
	if s == nil {
		return nil
	}
	// The validator reads a repeated key's last value, gjson (and so most
	// tools) its first: with duplicates, the tool could see arguments that
	// were never validated. Requests are already scanned strictly (scanned);
	// this covers the arguments of chats, rules and scripts.
	if !scanned {
		if _, serr := protocol.ScanStrict(args, maxResultDepth); serr != nil {
			if strings.HasPrefix(serr.Reason, "duplicate key") {
				return protocol.Errorf(protocol.InvalidArgs, "tool %q: arguments: %v", name, serr)
			}
			return protocol.Errorf(protocol.InvalidArgs, "tool %q: arguments are not JSON: %v", name, serr)
		}
	}
	return checkSchema(name, s, simple, args, protocol.InvalidArgs, "arguments are not JSON", "arguments do not match input_schema")
}

// checkSchema checks data against s; the error, of code code, lists every
// violation after the words noMatch (notJSON: data is not JSON).
func checkSchema(name string, s *jsonschema.Schema, simple *simpleSchema, data []byte, code protocol.Code, notJSON, noMatch string) *protocol.Error {
	if simple != nil && simple.check(data) == verdictValid {
		return nil
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return protocol.Errorf(code, "tool %q: %s: %v", name, notJSON, err)
	}
	err = s.Validate(inst)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return protocol.Errorf(code, "tool %q: %v", name, oneLine(err))
	}
	var vs []Violation
	leaves(ve, &vs)
	sortViolations(vs)
	if len(vs) == 0 {
		vs = append(vs, Violation{Pointer: "", Message: oneLine(err)})
	}
	details, _ := json.Marshal(vs)
	msg := fmt.Sprintf("tool %q: %s: %s: %s", name, noMatch, pointerText(vs[0].Pointer), vs[0].Message)
	if len(vs) > 1 {
		msg += fmt.Sprintf(" (and %d more)", len(vs)-1)
	}
	return &protocol.Error{Code: code, Message: msg, Details: details}
}

func pointerText(p string) string {
	if p == "" {
		return "at the top"
	}
	return "at " + p
}

// sortViolations puts violations in a stable order (by pointer, then
// message): the validator visits object properties in map order.
func sortViolations(vs []Violation) {
	sort.Slice(vs, func(i, j int) bool {
		if vs[i].Pointer != vs[j].Pointer {
			return vs[i].Pointer < vs[j].Pointer
		}
		return vs[i].Message < vs[j].Message
	})
}

// printer renders the validator's messages in English.
var printer = message.NewPrinter(language.English)

// leaves gathers the innermost causes of a validation error: the concrete
// problems, not the summaries ("allOf failed") above them.
func leaves(e *jsonschema.ValidationError, out *[]Violation) {
	if len(e.Causes) == 0 {
		msg := sortQuotedLists(e.ErrorKind.LocalizedString(printer))
		*out = append(*out, Violation{Pointer: jsonPointer(e.InstanceLocation), Message: msg})
		return
	}
	for _, c := range e.Causes {
		leaves(c, out)
	}
}

// quotedList matches a list of quoted names such as 'b', 'a'.
var quotedList = regexp.MustCompile(`'[^']*'(?:, '[^']*')+`)

// sortQuotedLists sorts the names in lists such as "additional properties
// 'b', 'a' not allowed": the validator lists them in map order.
func sortQuotedLists(msg string) string {
	if !strings.HasPrefix(msg, "additional properties") && !strings.HasPrefix(msg, "missing properties") {
		return msg // other lists (enum values) keep the schema's order
	}
	return quotedList.ReplaceAllStringFunc(msg, func(list string) string {
		names := strings.Split(list, ", ")
		sort.Strings(names)
		return strings.Join(names, ", ")
	})
}

// jsonPointer renders a location as an RFC 6901 pointer ("" is the root).
func jsonPointer(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		b.WriteString(strings.NewReplacer("~", "~0", "/", "~1").Replace(t))
	}
	return b.String()
}
