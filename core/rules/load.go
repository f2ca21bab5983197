package rules

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/pelletier/go-toml/v2"

	"github.com/clara-lib/clara/core/logging"
	"github.com/clara-lib/clara/core/protocol"
)

// ValidEventName reports whether name can be a trigger or an emitted event:
// the built-in hook points of SPEC §7.2 (on_turn_start, on_tool_call...)
// and any custom event, [a-z][a-z0-9_.]* of at most 128 bytes. (A loop:
// every clara_emit asks, and the regexp cost a tenth of an emission that
// matched nothing.)
func ValidEventName(name string) bool {
	if len(name) == 0 || len(name) > 128 || name[0] < 'a' || name[0] > 'z' {
		return false
	}
	for i := 1; i < len(name); i++ {
		if c := name[i]; !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

var ruleID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)

// Source is one rule file's text. Name is what errors cite (a path, or
// "inline" for text given to rules_load).
type Source struct {
	Name string
	Text []byte
	// Dir is where the Lua script paths of its rules (script = "x.lua")
	// are resolved; "" is the directory of Name.
	Dir string
	// Root is the folder those scripts must stay inside, symbolic links
	// resolved (the project root, a plugin's folder); "" is Dir.
	Root string
	// Namespace is the plugin the rules belong to ("" for none): their
	// set_state keys, context.state and Lua's state.get live in it.
	Namespace string
	// Shadow puts every rule of the source in shadow mode, whatever the
	// file says (rules.mode = "shadow"): their decisions are recorded,
	// not enforced (decide.go).
	Shadow bool
	// Host makes the source a rule of the host (host.go): Text is its
	// descriptor, its condition and action are these functions.
	Host *HostFuncs
}

// The shapes of a rule file (SPEC §7.1): one rule in [rule] with top-level
// [condition] and [action] or [[actions]], or many in [[rules]], each with
// its own condition and action(s).
type fileDoc struct {
	// Syntax is how the file's conditions are written: "expr" or "python"
	// (as in the seed, pycond.go); a condition's own syntax wins.
	Syntax *string `toml:"syntax" json:"syntax"`
	// Mode is the mode of the file's rules ("enforce" or "shadow"); a
	// rule's own mode wins.
	Mode      *string     `toml:"mode" json:"mode"`
	Rule      *ruleDoc    `toml:"rule" json:"rule"`
	Condition *condDoc    `toml:"condition" json:"condition"`
	Action    *actionDoc  `toml:"action" json:"action"`
	Actions   []actionDoc `toml:"actions" json:"actions"`
	Rules     []ruleDoc   `toml:"rules" json:"rules"`
}

type ruleDoc struct {
	ID          string      `toml:"id" json:"id"`
	Description string      `toml:"description" json:"description"`
	Trigger     string      `toml:"trigger" json:"trigger"`
	Priority    int         `toml:"priority" json:"priority"`
	Stop        bool        `toml:"stop" json:"stop"`
	Mode        *string     `toml:"mode" json:"mode"`             // "enforce" or "shadow" (decide.go)
	TimeoutMS   any         `toml:"timeout_ms" json:"timeout_ms"` // the rule's Lua: deadline, 1 to 5000
	MemoryMB    any         `toml:"memory_mb" json:"memory_mb"`   // the rule's Lua: memory cap, 1 to 1024
	Condition   *condDoc    `toml:"condition" json:"condition"`
	Action      *actionDoc  `toml:"action" json:"action"`
	Actions     []actionDoc `toml:"actions" json:"actions"`
}

type condDoc struct {
	Syntax     *string `toml:"syntax" json:"syntax"`
	Expression *string `toml:"expression" json:"expression"`
	Lua        *string `toml:"lua" json:"lua"`
	Script     *string `toml:"script" json:"script"`
	// Semantic is a semantic condition (semantic.go).
	Semantic *semanticDoc `toml:"semantic" json:"semantic"`
}

// UnmarshalText reads a condition given as a string (`condition = "..."`,
// as the seed's examples write it): the expression.
func (d *condDoc) UnmarshalText(text []byte) error {
	s := string(text)
	*d = condDoc{Expression: &s}
	return nil
}

// UnmarshalJSON reads a condition given as a string or as an object.
func (d *condDoc) UnmarshalJSON(data []byte) error {
	var s string
	if json.Unmarshal(data, &s) == nil {
		return d.UnmarshalText([]byte(s))
	}
	type plain condDoc // without these methods
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	return dec.Decode((*plain)(d))
}

type actionDoc struct {
	Type      string         `toml:"type" json:"type"`
	Message   *string        `toml:"message" json:"message"`
	Priority  *string        `toml:"priority" json:"priority"`
	Level     *string        `toml:"level" json:"level"`
	Key       *string        `toml:"key" json:"key"`
	Value     any            `toml:"value" json:"value"`
	Event     *string        `toml:"event" json:"event"`
	Payload   map[string]any `toml:"payload" json:"payload"`
	Reason    *string        `toml:"reason" json:"reason"`
	Tool      *string        `toml:"tool" json:"tool"`
	Arguments map[string]any `toml:"arguments" json:"arguments"`
	Lua       *string        `toml:"lua" json:"lua"`
	Script    *string        `toml:"script" json:"script"`
	// rewrite and redact (decide.go)
	Prompt      *string  `toml:"prompt" json:"prompt"`
	Merge       *bool    `toml:"merge" json:"merge"`
	Patterns    []string `toml:"patterns" json:"patterns"`
	Replacement *string  `toml:"replacement" json:"replacement"`
	// notify_self delivered later (the seed's deferred notices)
	DeliverOn      *string `toml:"deliver_on" json:"deliver_on"`
	DeliverAfterMS *int    `toml:"deliver_after_ms" json:"deliver_after_ms"`
}

// Load compiles rule sources into a Set. thresholds are the values rule
// conditions and templates see as `thresholds` (config rules.thresholds),
// bound into the Set. Every problem of every source is reported, as a
// protocol.Problems error (file, line, message); the Set is nil when there
// is any.
func Load(sources []Source, thresholds map[string]any) (*Set, error) {
	c := newCompiler()
	var problems protocol.Problems
	var all []*Rule
	seen := map[string]*Rule{} // rule id -> where it was defined
	for _, src := range sources {
		rules, errs := c.loadSource(src)
		problems = append(problems, errs...)
		for _, r := range rules {
			r.Namespace = src.Namespace
			if prev, dup := seen[r.ID]; dup {
				problems = append(problems, protocol.Problem{File: r.File, Line: r.Line,
					Message: fmt.Sprintf("rule %q is defined twice (first at %s:%d)", r.ID, prev.File, prev.Line)})
				continue
			}
			seen[r.ID] = r
			r.order = len(all)
			all = append(all, r)
		}
	}
	if len(problems) > 0 {
		return nil, problems
	}
	return bindSet(all, thresholds), nil
}

func (c *compiler) loadSource(src Source) ([]*Rule, protocol.Problems) {
	if src.Host != nil {
		return c.loadHostRule(src)
	}
	var doc fileDoc
	isJSON := strings.EqualFold(filepath.Ext(src.Name), ".json") || bytes.HasPrefix(bytes.TrimSpace(src.Text), []byte("{"))
	if problems := decode(src.Name, src.Text, isJSON, &doc); problems != nil {
		return nil, problems
	}
	shape := func(line int, msg string) ([]*Rule, protocol.Problems) {
		return nil, protocol.Problems{{File: src.Name, Line: line, Message: msg}}
	}
	var docs []ruleDoc
	switch {
	case doc.Rule != nil && len(doc.Rules) > 0:
		return shape(1, "use either [rule] or [[rules]], not both")
	case doc.Rule != nil:
		r := *doc.Rule
		if r.Condition != nil || r.Action != nil || r.Actions != nil {
			return shape(locate(src.Text, r.ID), "with [rule], condition and action(s) are top-level tables ([condition], [action])")
		}
		r.Condition, r.Action, r.Actions = doc.Condition, doc.Action, doc.Actions
		docs = []ruleDoc{r}
	case len(doc.Rules) > 0:
		if doc.Condition != nil || doc.Action != nil || doc.Actions != nil {
			return shape(1, "with [[rules]], each rule has its own condition and action(s) ([rules.condition], [[rules.actions]])")
		}
		docs = doc.Rules
	case doc.Condition != nil || doc.Action != nil || doc.Actions != nil:
		return shape(1, "[condition] and [action] belong to a rule: give [rule] (or [[rules]])")
	default:
		return nil, nil // an empty file holds no rules
	}
	if doc.Mode != nil {
		for i := range docs {
			if docs[i].Mode == nil {
				docs[i].Mode = doc.Mode
			}
		}
	}
	if doc.Syntax != nil {
		for i := range docs {
			if c := docs[i].Condition; c != nil && c.Syntax == nil {
				c.Syntax = doc.Syntax
			}
		}
	}
	var out []*Rule
	var problems protocol.Problems
	c.ids = keyLines{text: src.Text, key: "id"}
	for i := range docs {
		r, errs := c.compileRule(src, &docs[i])
		problems = append(problems, errs...)
		if r != nil {
			out = append(out, r)
		}
	}
	return out, problems
}

// decode reads a rule or test file strictly: unknown keys are problems at
// their line. It returns nil when the text decoded.
func decode(name string, text []byte, isJSON bool, v any) protocol.Problems {
	if isJSON {
		return decodeJSON(name, text, v)
	}
	return DecodeTOML(name, text, v)
}

// DecodeTOML decodes text strictly into v: an unknown key or a value of the
// wrong type is a problem at its line and column (plugin manifests use it
// too, so both read alike).
func DecodeTOML(name string, text []byte, v any) protocol.Problems {
	dec := toml.NewDecoder(bytes.NewReader(text))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	var sm *toml.StrictMissingError
	var de *toml.DecodeError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &sm) && len(sm.Errors) > 0:
		var problems protocol.Problems
		for _, e := range sm.Errors {
			row, col := e.Position()
			problems = append(problems, protocol.Problem{File: name, Line: row, Col: col,
				Message: fmt.Sprintf("unknown key %q", strings.Join(e.Key(), "."))})
		}
		return problems
	case errors.As(err, &de):
		row, col := de.Position()
		return protocol.Problems{{File: name, Line: row, Col: col, Message: strings.TrimPrefix(de.Error(), "toml: ")}}
	}
	return protocol.Problems{{File: name, Line: 1, Message: err.Error()}}
}

// unknownField is encoding/json's error for a key the target lacks.
var unknownField = regexp.MustCompile(`^json: unknown field ("(?:[^"\\]|\\.)*")$`)

func decodeJSON(name string, text []byte, v any) protocol.Problems {
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		if rest := bytes.TrimLeft(text[dec.InputOffset():], " \t\r\n"); len(rest) > 0 {
			line, col := lineColAt(text, len(text)-len(rest))
			return protocol.Problems{{File: name, Line: line, Col: col, Message: "data after the JSON value"}}
		}
		return nil
	}
	p := protocol.Problem{File: name, Line: 1, Message: strings.TrimPrefix(err.Error(), "json: ")}
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		// Offset is after the byte that was wrong.
		p.Line, p.Col = lineColAt(text, int(se.Offset)-1)
	case errors.As(err, &te):
		p.Line = lineAt(text, int(te.Offset)) // after the value: its line, not its column
	case unknownField.MatchString(err.Error()):
		p.Line = locate(text, unknownField.FindStringSubmatch(err.Error())[1])
	}
	return protocol.Problems{p}
}

// lineColAt is the line and column (from 1, in bytes) of text[offset].
func lineColAt(text []byte, offset int) (line, col int) {
	offset = max(min(offset, len(text)), 0)
	return lineAt(text, offset), offset - bytes.LastIndexByte(text[:offset], '\n')
}

func lineAt(text []byte, offset int) int {
	if offset > len(text) {
		offset = len(text)
	}
	return bytes.Count(text[:offset], []byte("\n")) + 1
}

// locate finds the line where needle (a rule id, an expression) appears,
// so that problems found after decoding still point at their line.
func locate(text []byte, needle string) int {
	if needle != "" {
		if i := bytes.Index(text, []byte(needle)); i >= 0 {
			return lineAt(text, i)
		}
		// In a TOML basic string or in JSON, quotes, backslashes and
		// control characters appear escaped.
		var esc bytes.Buffer
		enc := json.NewEncoder(&esc)
		enc.SetEscapeHTML(false)
		if enc.Encode(needle) == nil {
			if quoted := bytes.TrimSuffix(esc.Bytes(), []byte("\n")); len(quoted) > 2 && !bytes.Equal(quoted[1:len(quoted)-1], []byte(needle)) {
				if i := bytes.Index(text, quoted[1:len(quoted)-1]); i >= 0 {
					return lineAt(text, i)
				}
			}
		}
		if nl := strings.IndexByte(needle, '\n'); nl > 0 {
			return locate(text, needle[:nl])
		}
	}
	return 1
}

// keyLines finds the line of each rule (or test case) of one source as they
// come, by the value of their key ("id", "name"), in one pass over the
// text: they follow each other in their file, so the search for the next
// one starts where the last was found, and a line number comes from an
// index of the text's newlines. Searching the whole text from its start
// for every rule, and counting its lines up to the match, made loading n
// rules cost n² (10,000 rules took seconds; docs/performance.md).
type keyLines struct {
	text     []byte
	key      string
	newlines []int // offsets of the text's '\n', made at the first lookup
	from     int   // where the next value is looked for
}

// line is the line of the next `key = "value"` (or `"key": "value"`) at
// or after the last one found; the first quoted value after it when no
// such key precedes one (the value alone, as locate finds it, when
// nothing follows).
func (x *keyLines) line(value string) int {
	quoted := `"` + value + `"`
	first := -1
	for at := x.from; at < len(x.text); {
		i := bytes.Index(x.text[at:], []byte(quoted))
		if i < 0 {
			break
		}
		i += at
		if first < 0 {
			first = i
		}
		if x.keyBefore(i) {
			first = i
			break
		}
		at = i + 1
	}
	if first < 0 {
		return locate(x.text, quoted)
	}
	x.from = first + len(quoted)
	if x.newlines == nil {
		x.newlines = make([]int, 0, bytes.Count(x.text, []byte("\n")))
		for i, c := range x.text {
			if c == '\n' {
				x.newlines = append(x.newlines, i)
			}
		}
	}
	return sort.SearchInts(x.newlines, first) + 1 // the newlines before it, plus one
}

// keyBefore tells whether text[:i] ends in the key and '=' or ':' (blanks
// around them allowed, the key quoted or not).
func (x *keyLines) keyBefore(i int) bool {
	t := bytes.TrimRight(x.text[:i], " \t")
	if len(t) == 0 || t[len(t)-1] != '=' && t[len(t)-1] != ':' {
		return false
	}
	t = bytes.TrimRight(t[:len(t)-1], " \t")
	t = bytes.TrimSuffix(t, []byte(`"`))
	if !bytes.HasSuffix(t, []byte(x.key)) {
		return false
	}
	t = t[:len(t)-len(x.key)]
	if len(t) > 0 { // the key is a whole word (not "guid", "rule_id")
		c := t[len(t)-1]
		return !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-')
	}
	return true
}

// ruleProblems collects the problems of one rule.
type ruleProblems struct {
	src  *Source
	id   string
	list protocol.Problems
}

// add reports a problem of the rule at line.
func (p *ruleProblems) add(line int, format string, args ...any) {
	p.list = append(p.list, protocol.Problem{File: p.src.Name, Line: line, Message: fmt.Sprintf("rule %q: ", p.id) + fmt.Sprintf(format, args...)})
}

// addErr reports err, prefixed with what, at line, or where err says it is
// (a Lua compile error is at its script's line).
func (p *ruleProblems) addErr(line int, what string, err error) {
	var at *located
	if errors.As(err, &at) {
		p.list = append(p.list, protocol.Problem{File: at.file, Line: at.line, Message: fmt.Sprintf("rule %q: %s: %s", p.id, what, at.msg)})
		return
	}
	p.add(line, "%s: %v", what, err)
}

func (c *compiler) compileRule(src Source, d *ruleDoc) (*Rule, protocol.Problems) {
	line := c.ids.line(d.ID)
	if !ruleID.MatchString(d.ID) {
		return nil, protocol.Problems{{File: src.Name, Line: line, Message: fmt.Sprintf("rule id %q: use 1 to 128 letters, digits, '_', '.' or '-'", d.ID)}}
	}
	problems := &ruleProblems{src: &src, id: d.ID}
	if d.Trigger == "" {
		problems.add(line, "trigger is missing")
	} else if !ValidEventName(d.Trigger) {
		problems.add(locate(src.Text, d.Trigger), "trigger %q is not an event name ([a-z][a-z0-9_.]*)", d.Trigger)
	}
	r := &Rule{ID: d.ID, Description: d.Description, Trigger: d.Trigger, Priority: d.Priority, Stop: d.Stop,
		File: src.Name, Line: line}
	c.lua = luaLimits(src, d, line, problems)
	if d.Condition != nil {
		c.compileCondition(src, d.Condition, r, problems)
	}
	c.compileActions(src, d, r, problems)
	r.Mode = ModeEnforce
	if d.Mode != nil {
		switch *d.Mode {
		case ModeEnforce, ModeShadow:
			r.Mode = canonical(*d.Mode, ModeEnforce, ModeShadow)
		default:
			problems.add(locateKey(src.Text, "mode", "mode", line), "mode must be %q or %q, not %q", ModeEnforce, ModeShadow, *d.Mode)
		}
	}
	if src.Shadow {
		r.Mode = ModeShadow
	}
	r.guard = isGuard(r)
	if r.condExpr != "" && !r.lua {
		r.sources = append(r.sources, r.condExpr)
	}
	if (d.TimeoutMS != nil || d.MemoryMB != nil) && !r.lua && !hasLuaAction(r) {
		problems.add(locateKey(src.Text, "timeout_ms", "memory_mb", line), "timeout_ms and memory_mb apply to a rule's Lua, and this rule has none")
	}
	if len(problems.list) > 0 {
		return nil, problems.list
	}
	return r, nil
}

// compileCondition compiles a rule's condition into r: an expression, with
// its fast forms, or a Lua script.
func (c *compiler) compileCondition(src Source, cd *condDoc, r *Rule, problems *ruleProblems) {
	n := 0
	for _, p := range []*string{cd.Expression, cd.Lua, cd.Script} {
		if p != nil {
			n++
		}
	}
	if cd.Semantic != nil {
		n++
	}
	switch {
	case n != 1:
		problems.add(r.Line, "condition: give one of expression, lua, script or semantic")
	case cd.Semantic != nil:
		sem, field, err := compileSemantic(cd.Semantic)
		if err != nil {
			problems.add(locate(src.Text, "semantic"), "semantic condition: %v", err)
			return
		}
		r.semantic = sem
		r.CondSource = fmt.Sprintf("semantic(%q, %s) >= %v", sem.concept, field, sem.threshold)
		r.sources = append(r.sources, field)
	case cd.Lua != nil || cd.Script != nil:
		script, text, err := luaSource(src, cd.Lua, cd.Script, "condition", c.lua)
		if err != nil {
			problems.addErr(r.Line, "condition", err)
		}
		r.luaCond = script
		r.CondSource = text
		r.lua = true
	case cd.Expression != nil:
		r.CondSource = *cd.Expression
		text, ok := c.conditionText(src, cd, r, problems)
		if !ok {
			return
		}
		r.condExpr = text
		prog, err := c.condition(text)
		if err != nil {
			what := "condition"
			if text != *cd.Expression {
				what = fmt.Sprintf("condition (python, read as %s)", text)
			}
			problems.add(locate(src.Text, *cd.Expression), "%s: %v%s", what, err, flattenedHint(text != *cd.Expression, err))
		}
		r.cond = prog
		r.simple = parseSimple(text)
		if r.simple == nil {
			r.guards = parseGuards(text)
			r.counted = parseCounted(text)
		}
	}
}

// compileActions compiles a rule's actions into r.
func (c *compiler) compileActions(src Source, d *ruleDoc, r *Rule, problems *ruleProblems) {
	actions := d.Actions
	if d.Action != nil {
		if len(actions) > 0 {
			problems.add(r.Line, "give [action] or [[actions]], not both")
		}
		actions = []actionDoc{*d.Action}
	}
	if len(actions) == 0 && (src.Host == nil || src.Host.Action == nil) { // a host's action function is one
		problems.add(r.Line, "no action: give [action] or [[actions]]")
	}
	for i := range actions {
		a, err := c.compileAction(src, d.Trigger, &actions[i])
		if err != nil {
			problems.addErr(locate(src.Text, `"`+actions[i].Type+`"`), fmt.Sprintf("action %d (%s)", i+1, actions[i].Type), err)
			continue
		}
		if a.kind == ActLog {
			a.logLevel, _ = logging.ParseLevel(a.level)
			a.logPrefix = fmt.Sprintf("rule %q: ", r.ID)
			if a.message.static {
				a.logLine = a.logPrefix + a.message.text
			}
		}
		r.actions = append(r.actions, a)
		r.sources = append(r.sources, actionSources(&actions[i])...)
		if a.script != nil {
			r.lua = true
		}
	}
}

// sortedKeys lists a map's keys in order, for stable output.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// actionSources lists the texts of an action that may hold templates.
func actionSources(d *actionDoc) []string {
	var out []string
	for _, p := range []*string{d.Message, d.Reason, d.Prompt} {
		if p != nil {
			out = append(out, *p)
		}
	}
	if d.Merge != nil && *d.Merge {
		out = append(out, "context.tool.arguments") // merged into the new ones
	}
	for _, v := range []any{d.Value, d.Payload, d.Arguments} {
		if v != nil {
			b, _ := json.Marshal(v)
			out = append(out, string(b))
		}
	}
	return out
}

// firstLine is the first non-empty line of a text, to find where an inline
// script starts in its file.
func firstLine(text string) string {
	for _, l := range strings.Split(text, "\n") {
		if t := strings.TrimSpace(l); t != "" {
			return t
		}
	}
	return text
}
