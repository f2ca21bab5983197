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
)

// Built-in hook points (SPEC §7.2). Any other name matching eventName is a
// custom event.
var BuiltinTriggers = []string{
	"on_query_start", "on_turn_start", "on_turn_end",
	"on_tool_call", "on_tool_complete", "on_tool_failure",
	"on_callback_complete", "on_callback_failure", "on_session_end",
}

var eventName = regexp.MustCompile(`^[a-z][a-z0-9_.]*$`)

// ValidEventName reports whether name can be a trigger or an emitted event.
func ValidEventName(name string) bool { return len(name) <= 128 && eventName.MatchString(name) }

var ruleID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)

// Source is one rule file's text. Name is what errors cite (a path, or
// "inline" for text given to rules_load).
type Source struct {
	Name string
	Text []byte
	// Dir is where the Lua script paths of its rules (script = "x.lua")
	// are resolved; "" is the directory of Name.
	Dir string
}

// LoadError is every problem found in a rule set, each prefixed
// "file:line: ".
type LoadError struct{ Problems []string }

func (e *LoadError) Error() string {
	if len(e.Problems) == 1 {
		return e.Problems[0]
	}
	return fmt.Sprintf("%d problems: %s", len(e.Problems), strings.Join(e.Problems, "; "))
}

// The shapes of a rule file (SPEC §7.1): one rule in [rule] with top-level
// [condition] and [action] or [[actions]], or many in [[rules]], each with
// its own condition and action(s).
type fileDoc struct {
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
	Condition   *condDoc    `toml:"condition" json:"condition"`
	Action      *actionDoc  `toml:"action" json:"action"`
	Actions     []actionDoc `toml:"actions" json:"actions"`
}

type condDoc struct {
	Expression *string `toml:"expression" json:"expression"`
	Lua        *string `toml:"lua" json:"lua"`
	Script     *string `toml:"script" json:"script"`
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
}

// Load compiles rule sources into a Set. thresholds are the values rule
// conditions and templates see as `thresholds` (config rules.thresholds).
// Every problem of every source is reported, with its file and line; the
// Set is nil when there is any.
func Load(sources []Source, thresholds map[string]any) (*Set, error) {
	c := newCompiler(thresholds)
	var problems []string
	var all []*Rule
	seen := map[string]string{} // rule id -> where it was defined
	for _, src := range sources {
		rules, errs := c.loadSource(src)
		problems = append(problems, errs...)
		for _, r := range rules {
			if prev, dup := seen[r.ID]; dup {
				problems = append(problems, fmt.Sprintf("%s:%d: rule %q is defined twice (first at %s)", r.File, r.Line, r.ID, prev))
				continue
			}
			seen[r.ID] = fmt.Sprintf("%s:%d", r.File, r.Line)
			r.order = len(all)
			all = append(all, r)
		}
	}
	if len(problems) > 0 {
		return nil, &LoadError{Problems: problems}
	}
	set := newSet(all)
	if thresholds != nil {
		set.thresholds = thresholds
		for _, r := range all {
			if r.simple != nil {
				r.folded = r.simple.fold(thresholds)
			}
			if r.guards != nil {
				r.foldedGuards = (&simpleCond{terms: r.guards}).fold(thresholds).terms
			}
		}
	}
	set.slots = assignSlots(all)
	markToolFields(all)
	return set, nil
}

func (c *compiler) loadSource(src Source) ([]*Rule, []string) {
	var doc fileDoc
	isJSON := strings.EqualFold(filepath.Ext(src.Name), ".json") || bytes.HasPrefix(bytes.TrimSpace(src.Text), []byte("{"))
	if err := decode(src.Text, isJSON, &doc); err != nil {
		return nil, []string{fmt.Sprintf("%s:%s", src.Name, err)}
	}
	var docs []ruleDoc
	switch {
	case doc.Rule != nil && len(doc.Rules) > 0:
		return nil, []string{fmt.Sprintf("%s:1: use either [rule] or [[rules]], not both", src.Name)}
	case doc.Rule != nil:
		r := *doc.Rule
		if r.Condition != nil || r.Action != nil || r.Actions != nil {
			return nil, []string{fmt.Sprintf("%s:%d: with [rule], condition and action(s) are top-level tables ([condition], [action])", src.Name, locate(src.Text, r.ID))}
		}
		r.Condition, r.Action, r.Actions = doc.Condition, doc.Action, doc.Actions
		docs = []ruleDoc{r}
	case len(doc.Rules) > 0:
		if doc.Condition != nil || doc.Action != nil || doc.Actions != nil {
			return nil, []string{fmt.Sprintf("%s:1: with [[rules]], each rule has its own condition and action(s) ([rules.condition], [[rules.actions]])", src.Name)}
		}
		docs = doc.Rules
	case doc.Condition != nil || doc.Action != nil || doc.Actions != nil:
		return nil, []string{fmt.Sprintf("%s:1: [condition] and [action] belong to a rule: give [rule] (or [[rules]])", src.Name)}
	default:
		return nil, nil // an empty file holds no rules
	}
	var out []*Rule
	var problems []string
	for i := range docs {
		r, errs := c.compileRule(src, &docs[i])
		problems = append(problems, errs...)
		if r != nil {
			out = append(out, r)
		}
	}
	return out, problems
}

// decode reads a rule or test file strictly: unknown keys are errors with
// their line. The error text starts with "line:" (no file).
func decode(text []byte, isJSON bool, v any) error {
	if isJSON {
		dec := json.NewDecoder(bytes.NewReader(text))
		dec.DisallowUnknownFields()
		if err := dec.Decode(v); err != nil {
			line := 1
			var se *json.SyntaxError
			var te *json.UnmarshalTypeError
			switch {
			case errors.As(err, &se):
				line = lineAt(text, int(se.Offset))
			case errors.As(err, &te):
				line = lineAt(text, int(te.Offset))
			}
			return fmt.Errorf("%d: %s", line, strings.TrimPrefix(err.Error(), "json: "))
		}
		if rest := bytes.TrimLeft(text[dec.InputOffset():], " \t\r\n"); len(rest) > 0 {
			return fmt.Errorf("%d: data after the JSON value", lineAt(text, len(text)-len(rest)))
		}
		return nil
	}
	dec := toml.NewDecoder(bytes.NewReader(text))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	var sm *toml.StrictMissingError
	var de *toml.DecodeError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &sm) && len(sm.Errors) > 0:
		var parts []string
		for _, e := range sm.Errors {
			row, _ := e.Position()
			parts = append(parts, fmt.Sprintf("%d: unknown key %q", row, strings.Join(e.Key(), ".")))
		}
		return errors.New(strings.Join(parts, "; "))
	case errors.As(err, &de):
		row, _ := de.Position()
		return fmt.Errorf("%d: %s", row, strings.TrimPrefix(de.Error(), "toml: "))
	}
	return fmt.Errorf("1: %v", err)
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

func (c *compiler) compileRule(src Source, d *ruleDoc) (*Rule, []string) {
	line := locate(src.Text, `"`+d.ID+`"`)
	var problems []string
	fail := func(at int, format string, args ...any) {
		problems = append(problems, fmt.Sprintf("%s:%d: rule %q: %s", src.Name, at, d.ID, fmt.Sprintf(format, args...)))
	}
	if !ruleID.MatchString(d.ID) {
		problems = append(problems, fmt.Sprintf("%s:%d: rule id %q: use 1 to 128 letters, digits, '_', '.' or '-'", src.Name, line, d.ID))
		return nil, problems
	}
	if d.Trigger == "" {
		fail(line, "trigger is missing")
	} else if !ValidEventName(d.Trigger) {
		fail(locate(src.Text, d.Trigger), "trigger %q is not an event name ([a-z][a-z0-9_.]*)", d.Trigger)
	}
	r := &Rule{ID: d.ID, Description: d.Description, Trigger: d.Trigger, Priority: d.Priority, Stop: d.Stop,
		File: src.Name, Line: line}
	if d.Condition != nil {
		cd := d.Condition
		n := 0
		for _, p := range []*string{cd.Expression, cd.Lua, cd.Script} {
			if p != nil {
				n++
			}
		}
		switch {
		case n != 1:
			fail(line, "condition: give one of expression, lua or script")
		case cd.Lua != nil || cd.Script != nil:
			script, text, err := luaSource(src, cd.Lua, cd.Script, "condition")
			if err != nil {
				at := line
				if cd.Lua != nil {
					at = locate(src.Text, firstLine(*cd.Lua))
				}
				fail(at, "condition: %v", err)
			}
			r.luaCond = script
			r.CondSource = text
			r.lua = true
		case cd.Expression != nil:
			r.CondSource = *cd.Expression
			prog, err := c.condition(*cd.Expression)
			if err != nil {
				fail(locate(src.Text, *cd.Expression), "condition: %v", err)
			}
			r.cond = prog
			r.simple = parseSimple(*cd.Expression)
			if r.simple == nil {
				r.guards = parseGuards(*cd.Expression)
			}
		}
	}
	actions := d.Actions
	if d.Action != nil {
		if len(actions) > 0 {
			fail(line, "give [action] or [[actions]], not both")
		}
		actions = []actionDoc{*d.Action}
	}
	if len(actions) == 0 {
		fail(line, "no action: give [action] or [[actions]]")
	}
	for i := range actions {
		a, err := c.compileAction(src, d.Trigger, &actions[i])
		if err != nil {
			fail(locate(src.Text, `"`+actions[i].Type+`"`), "action %d (%s): %v", i+1, actions[i].Type, err)
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
	if r.CondSource != "" && !r.lua {
		r.sources = append(r.sources, r.CondSource)
	}
	if len(problems) > 0 {
		return nil, problems
	}
	return r, nil
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
	for _, p := range []*string{d.Message, d.Reason} {
		if p != nil {
			out = append(out, *p)
		}
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
