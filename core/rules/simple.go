package rules

import (
	"regexp"
	"strconv"
	"strings"
)

// A simple condition is one comparison of two operands, each a path into
// context or thresholds or a literal (`context.tool.result_bytes >
// thresholds.large_result_bytes`), or several joined all by `and` or all by
// `or`. Most rules on hot events look like this, and Fire evaluates them
// without expr and without building the whole context (an event on every
// tool call must cost little). Whenever an operand is absent or the two
// sides are not both numbers, both strings or both booleans, Fire falls
// back to expr, so the result, or the error, is always expr's.
type simpleCond struct {
	terms []comparison
	or    bool // terms joined by `or` (else by `and`)
}

// guards are the simple comparisons among the top-level `and` terms of a
// condition that is not simple as a whole (`context.tool.name == "x" and
// len(context.tool.arguments.q) > 3`). When one of them is false, so is
// the condition, and Fire skips expr's VM; as rule engines filter facts on
// their cheap tests first. Only without trace: a condition expr would have
// failed on (an error in an earlier term) then reads as not matched, and
// the trace must show expr's verdict.
func parseGuards(src string) []comparison {
	pieces, ok := topLevelAnds(src)
	if !ok || len(pieces) < 2 {
		return nil
	}
	var guards []comparison
	for _, p := range pieces {
		if cmp, ok := parseComparison(p); ok {
			guards = append(guards, cmp)
		}
	}
	return guards
}

// topLevelAnds splits src at its top-level `and` / `&&` operators: outside
// brackets and string literals. ok is false when src has, at top level, an
// operator binding looser than `and` (or, ||, the ternary ?:, the pipe |,
// let ... ;), so that its `and` terms are not its operands.
func topLevelAnds(src string) (pieces []string, ok bool) {
	depth, start := 0, 0
	isWord := func(b byte) bool {
		return b == '_' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z'
	}
	word := func(i int, w string) bool { // w at i, not inside a longer word
		return strings.HasPrefix(src[i:], w) && (i == 0 || !isWord(src[i-1])) &&
			(i+len(w) == len(src) || !isWord(src[i+len(w)]))
	}
	for i := 0; i < len(src); i++ {
		switch c := src[i]; c {
		case '"', '\'', '`':
			for i++; i < len(src) && src[i] != c; i++ {
				if src[i] == '\\' && c != '`' {
					i++
				}
			}
			if i >= len(src) {
				return nil, false
			}
		case '(', '[', '{':
			depth++
		case ')', ']', '}':
			if depth--; depth < 0 {
				return nil, false
			}
		default:
			if depth > 0 {
				continue
			}
			switch {
			case c == '|' || c == ';' || word(i, "or") || word(i, "let"):
				return nil, false
			case c == '?':
				if i+1 < len(src) && (src[i+1] == '.' || src[i+1] == '?') {
					i++ // ?. and ?? bind tighter than and
					continue
				}
				return nil, false // the ternary
			case c == '&' && i+1 < len(src) && src[i+1] == '&':
				pieces = append(pieces, src[start:i])
				i++
				start = i + 1
			case word(i, "and"):
				pieces = append(pieces, src[start:i])
				i += 2
				start = i + 1
			}
		}
	}
	if depth != 0 {
		return nil, false
	}
	return append(pieces, src[start:]), true
}

type comparison struct {
	op          string
	left, right operand
}

type operand struct {
	literal bool
	value   Value     // when literal
	root    string    // "context" or "thresholds"
	path    []string  // after the root
	slot    int       // context paths: 1 + the path's number in its Set (assignSlots)
	count   bool      // len(context.path): what the path holds, counted as expr's len counts
	tool    toolField // context.tool.<field>, for Trigger.RuledOut (markToolFields)
}

type toolField byte

const (
	toolName toolField = iota + 1
	toolResultBytes
	toolDurationMS
	toolError
)

// markToolFields marks the operands that read context.tool.name,
// result_bytes, duration_ms or error, which a tool event's ToolFacts give.
var toolFields = map[string]toolField{"name": toolName, "result_bytes": toolResultBytes, "duration_ms": toolDurationMS, "error": toolError}

func markToolFields(rules []*Rule) {
	fields := toolFields
	mark := func(cs []comparison) {
		for i := range cs {
			for _, o := range []*operand{&cs[i].left, &cs[i].right} {
				if !o.literal && o.root == "context" && len(o.path) == 2 && o.path[0] == "tool" {
					o.tool = fields[o.path[1]]
				}
			}
		}
	}
	for _, r := range rules {
		if r.simple != nil {
			mark(r.simple.terms)
		}
		if r.folded != nil {
			mark(r.folded.terms)
		}
		mark(r.guards)
		mark(r.foldedGuards)
	}
}

// ToolFacts are a tool event's own figures (context.tool), for
// Trigger.RuledOut.
type ToolFacts struct {
	Name        string
	Done        bool    // the call is over: the fields below exist
	ResultBytes float64 // when Done
	DurationMS  float64 // when Done
	Error       string  // when Done: "code: message", or "" when the call succeeded (null to rules)
}

// Field is what context.tool.<name> holds for a simple condition; ok is
// false when it is absent or null, or not one of the figures (arguments).
func (t *ToolFacts) Field(name string) (Value, bool) { return t.value(toolFields[name]) }

// value is what context.tool.<f> holds; ok is false when it is absent or
// null (expr decides then).
func (t *ToolFacts) value(f toolField) (Value, bool) {
	switch {
	case f == toolName:
		return String(t.Name), true
	case !t.Done:
	case f == toolResultBytes:
		return Number(t.ResultBytes), true
	case f == toolDurationMS:
		return Number(t.DurationMS), true
	case f == toolError && t.Error != "":
		return String(t.Error), true
	}
	return Value{}, false
}

// assignSlots numbers the distinct context paths that the simple
// conditions and guards of rules read, so that Fire looks each up once per
// event however many rules compare it (as rule engines share the tests
// of their alpha network). It returns how many there are.
// When no path is read twice in one evaluation of the set, there is
// nothing to share and no slots.
func assignSlots(rules []*Rule) int {
	ids := map[string]int{}
	refs := 0
	number := func(cs []comparison, count bool) {
		for i := range cs {
			for _, o := range []*operand{&cs[i].left, &cs[i].right} {
				if o.literal || o.root != "context" {
					continue
				}
				key := strings.Join(o.path, ".")
				id, ok := ids[key]
				if !ok {
					id = len(ids) + 1
					ids[key] = id
				}
				o.slot = id
				if count {
					refs++
				}
			}
		}
	}
	for _, r := range rules {
		// Fire uses the folded forms when it has them, else the plain ones:
		// count the reads of one, number both.
		if r.simple != nil {
			number(r.simple.terms, r.folded == nil || r.folded == r.simple)
		}
		if r.folded != nil && r.folded != r.simple {
			number(r.folded.terms, true)
		}
		number(r.guards, r.foldedGuards == nil)
		number(r.foldedGuards, true)
	}
	if refs > len(ids) {
		return len(ids)
	}
	clear := func(cs []comparison) {
		for i := range cs {
			cs[i].left.slot, cs[i].right.slot = 0, 0
		}
	}
	for _, r := range rules {
		if r.simple != nil {
			clear(r.simple.terms)
		}
		if r.folded != nil {
			clear(r.folded.terms)
		}
		clear(r.guards)
		clear(r.foldedGuards)
	}
	return 0
}

// slotValue is a context path's value, looked up once per event.
type slotValue struct {
	v          Value
	ok, looked bool
}

// Value is a scalar seen by a simple condition: a number, a string or a
// boolean, built by Number, String and Bool; the zero Value is absent, or
// not a scalar (expr decides then).
type Value struct {
	kind byte // 0: absent or not a scalar, 'n' number, 's' string, 'b' bool
	num  float64
	str  string
	b    bool
}

// Number, String and Bool build Values.
func Number(f float64) Value { return Value{kind: 'n', num: f} }
func String(s string) Value  { return Value{kind: 's', str: s} }
func Bool(b bool) Value      { return Value{kind: 'b', b: b} }

var simpleShape = regexp.MustCompile(`^\s*(\S+)\s*(>=|<=|==|!=|>|<)\s*(\S+)\s*$`)
var simplePath = regexp.MustCompile(`^(context|thresholds)(\.[A-Za-z_][A-Za-z0-9_]*)+$`)
var simpleString = regexp.MustCompile(`^"[^"\\]*"$|^'[^'\\]*'$`)

var simpleAnd = regexp.MustCompile(`\s+(?:and|&&)\s+`)
var simpleOr = regexp.MustCompile(`\s+(?:or|\|\|)\s+`)

// parseSimple returns the simple form of a condition, or nil. A string
// literal holding " and " splits into pieces that are not comparisons, so
// such conditions are simply left to expr.
func parseSimple(src string) *simpleCond { return parseSimpleWith(src, false) }

// parseCounted is parseSimple also taking len(context.path) as an
// operand: the form a condition that is not simple only because it
// counts is evaluated in (Rule.counted), after its guards.
func parseCounted(src string) *simpleCond {
	if !strings.Contains(src, "len(") {
		return nil
	}
	return parseSimpleWith(src, true)
}

func parseSimpleWith(src string, counts bool) *simpleCond {
	ands, ors := simpleAnd.Split(src, -1), simpleOr.Split(src, -1)
	if len(ands) > 1 && len(ors) > 1 {
		return nil // mixed: precedence is expr's business
	}
	c := &simpleCond{}
	pieces := ands
	if len(ors) > 1 {
		pieces, c.or = ors, true
	}
	for _, p := range pieces {
		cmp, ok := parseComparisonWith(p, counts)
		if !ok {
			return nil
		}
		c.terms = append(c.terms, cmp)
	}
	return c
}

func parseComparison(src string) (comparison, bool) { return parseComparisonWith(src, false) }

func parseComparisonWith(src string, counts bool) (comparison, bool) {
	m := simpleShape.FindStringSubmatch(src)
	if m == nil {
		return comparison{}, false
	}
	l, ok1 := parseOperand(m[1], counts)
	r, ok2 := parseOperand(m[3], counts)
	if !ok1 || !ok2 || (l.literal && r.literal) {
		return comparison{}, false
	}
	return comparison{op: m[2], left: l, right: r}, true
}

func parseOperand(s string, counts bool) (operand, bool) {
	if inner, ok := strings.CutPrefix(s, "len("); ok && counts && strings.HasSuffix(inner, ")") {
		inner = inner[:len(inner)-1]
		if !simplePath.MatchString(inner) || !strings.HasPrefix(inner, "context.") {
			return operand{}, false
		}
		return operand{root: "context", path: strings.Split(inner, ".")[1:], count: true}, true
	}
	switch {
	case simplePath.MatchString(s):
		parts := strings.Split(s, ".")
		return operand{root: parts[0], path: parts[1:]}, true
	case simpleString.MatchString(s):
		return operand{literal: true, value: String(s[1 : len(s)-1])}, true
	case s == "true" || s == "false":
		return operand{literal: true, value: Bool(s == "true")}, true
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil && !strings.ContainsAny(s, "xXpP_") {
		return operand{literal: true, value: Number(f)}, true
	}
	return operand{}, false
}

// fold returns the condition with its thresholds read from thresholds
// (they do not change while a Set is in force), or c itself when it reads
// none. A threshold that is not there stays a path, and expr decides.
func (c *simpleCond) fold(thresholds map[string]any) *simpleCond {
	out := &simpleCond{terms: append([]comparison(nil), c.terms...), or: c.or}
	changed := false
	for i := range out.terms {
		for _, o := range []*operand{&out.terms[i].left, &out.terms[i].right} {
			if o.literal || o.root != "thresholds" {
				continue
			}
			if v, ok := walk(thresholds, o.path); ok {
				if val := valueOf(v); val.kind != 0 {
					*o = operand{literal: true, value: val}
					changed = true
				}
			}
		}
	}
	if !changed {
		return c
	}
	return out
}

// valueOf turns a decoded JSON value into a scalar Value.
func valueOf(v any) Value {
	switch x := v.(type) {
	case float64:
		return Number(x)
	case int:
		return Number(float64(x))
	case int64:
		return Number(float64(x))
	case string:
		return String(x)
	case bool:
		return Bool(x)
	}
	return Value{}
}

func walk(m map[string]any, path []string) (any, bool) {
	var v any = m
	for _, p := range path {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = mm[p]; !ok {
			return nil, false
		}
	}
	return v, true
}

// ruledOut reports whether a guard is decided false.
func ruledOut(guards []comparison, resolve func(*operand) (Value, bool)) bool {
	for i := range guards {
		if r, ok := guards[i].eval(resolve); ok && !r {
			return true
		}
	}
	return false
}

// eval evaluates the condition; ok is false when expr must decide. Terms
// are evaluated left to right and stop where expr's would (the first false
// of an `and`, the first true of an `or`); a term that cannot be decided
// before that leaves the whole condition to expr.
func (c *simpleCond) eval(resolve func(*operand) (Value, bool)) (result, ok bool) {
	for i := range c.terms {
		r, ok := c.terms[i].eval(resolve)
		if !ok {
			return false, false
		}
		if r == c.or {
			return r, true
		}
	}
	return !c.or, true
}

func (c *comparison) eval(resolve func(*operand) (Value, bool)) (result, ok bool) {
	// A literal is read where it is, without a call that copies it out.
	l, r := &c.left.value, &c.right.value
	var lv, rv Value
	ok1, ok2 := true, true
	if !c.left.literal {
		lv, ok1 = resolve(&c.left)
		l = &lv
	}
	if !c.right.literal {
		rv, ok2 = resolve(&c.right)
		r = &rv
	}
	if !ok1 || !ok2 || l.kind == 0 || r.kind == 0 || l.kind != r.kind {
		return false, false
	}
	// The operator, without comparing strings: >, >=, <, <=, ==, !=.
	op := cmpOf(c.op)
	switch l.kind {
	case 'n':
		switch op {
		case cmpGT:
			return l.num > r.num, true
		case cmpGE:
			return l.num >= r.num, true
		case cmpLT:
			return l.num < r.num, true
		case cmpLE:
			return l.num <= r.num, true
		case cmpEQ:
			return l.num == r.num, true
		case cmpNE:
			return l.num != r.num, true
		}
	case 's':
		switch op {
		case cmpGT:
			return l.str > r.str, true
		case cmpGE:
			return l.str >= r.str, true
		case cmpLT:
			return l.str < r.str, true
		case cmpLE:
			return l.str <= r.str, true
		case cmpEQ:
			return l.str == r.str, true
		case cmpNE:
			return l.str != r.str, true
		}
	case 'b':
		switch op {
		case cmpEQ:
			return l.b == r.b, true
		case cmpNE:
			return l.b != r.b, true
		}
	}
	return false, false
}

type cmpCode byte

const (
	cmpGT cmpCode = iota + 1
	cmpGE
	cmpLT
	cmpLE
	cmpEQ
	cmpNE
)

// cmpOf is the code of one of the six operators parseComparison accepts.
func cmpOf(op string) cmpCode {
	switch {
	case op[0] == '>':
		return cmpGT + cmpCode(len(op)-1) // > or >=
	case op[0] == '<':
		return cmpLT + cmpCode(len(op)-1)
	case op[0] == '=':
		return cmpEQ
	}
	return cmpNE
}
