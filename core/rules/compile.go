package rules

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/checker"
	exprcompiler "github.com/expr-lang/expr/compiler"
	"github.com/expr-lang/expr/conf"
	"github.com/expr-lang/expr/file"
	"github.com/expr-lang/expr/optimizer"
	"github.com/expr-lang/expr/vm"
	"github.com/expr-lang/expr/vm/runtime"

	"github.com/clara-lib/clara/core/logging"
	"github.com/clara-lib/clara/rulelua"
)

// Bounds on rule expressions. Rules are configuration, but a mistake must
// not take the host down: an expression is short and small, repeat (which
// can allocate without bound) is gone, and every run has a memory budget
// (ranges, arrays and maps count against it) and a byte budget (strings and
// values built, budget.go).
const (
	maxExpressionBytes = 4096
	maxExpressionNodes = 1000
	memoryBudget       = 10000
)

// helpers are the functions of SPEC §7.2. They read the event's context,
// which the compiler passes as a hidden first argument.
var helpers = map[string]func(ctx map[string]any, args []any) (any, error){
	"context_above_threshold": func(ctx map[string]any, args []any) (any, error) {
		t, ok := number(args[0])
		if !ok {
			return nil, fmt.Errorf("context_above_threshold needs a number")
		}
		usage, _ := number(dig(ctx, "turn", "token_usage"))
		return usage >= t, nil
	},
	"tool_completed": func(ctx map[string]any, args []any) (any, error) {
		return toolEvent(ctx, args, "on_tool_complete")
	},
	"tool_failed": func(ctx map[string]any, args []any) (any, error) {
		return toolEvent(ctx, args, "on_tool_failure")
	},
}

// toolEvent: the event is event (a tool completing or failing) of the tool
// named by args[0].
func toolEvent(ctx map[string]any, args []any, event string) (any, error) {
	name, ok := args[0].(string)
	if !ok {
		return nil, fmt.Errorf("needs a tool name")
	}
	return dig(ctx, "event", "name") == event && dig(ctx, "tool", "name") == name, nil
}

func dig(m map[string]any, path ...string) any {
	var v any = m
	for _, p := range path {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = mm[p]
	}
	return v
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	}
	return 0, false
}

// compiler compiles the rules of one Load, on one goroutine.
type compiler struct {
	opts []expr.Option
	lua  rulelua.Limits // of the rule being compiled: its timeout_ms and memory_mb
	ids  keyLines       // the lines of the rules of the source being compiled

	// What makes loading many rules cost no more than it must (docs/
	// performance.md, "Curves"): expr's configuration for each kind of
	// compilation, made once instead of for every expression (expr.Compile
	// builds it anew from the options, about a hundred map entries), and
	// the programs already compiled, by kind and text: the expressions of
	// templates repeat from rule to rule ({{ context.level }}). A program
	// is immutable once compiled; rules share it as they would share its
	// text.
	configs  [2][2]*conf.Config // [asBool][bounded]
	programs map[compiled]compileResult
}

// compiled is what a program was compiled from.
type compiled struct {
	src            string
	asBool, bounds bool
}

type compileResult struct {
	prog *vm.Program
	err  error
}

// helperCalls rewrites helper(x) into __helper(context, x): helpers read
// the event without a closure per evaluation.
type helperCalls struct{}

func (helperCalls) Visit(node *ast.Node) {
	call, ok := (*node).(*ast.CallNode)
	if !ok {
		return
	}
	id, ok := call.Callee.(*ast.IdentifierNode)
	if !ok || helpers[id.Value] == nil {
		return
	}
	call.Callee = &ast.IdentifierNode{Value: "__" + id.Value}
	call.Arguments = append([]ast.Node{&ast.IdentifierNode{Value: "context"}}, call.Arguments...)
}

// mapFetches rewrites x.key into __get(x, "key"). expr reads members of
// map[string]any through reflection, which allocates and costs more than
// the rest of a typical condition; contexts are JSON, maps all the way.
// Optional members (x?.key) keep expr's own code, which short-circuits.
type mapFetches struct{}

func (mapFetches) Visit(node *ast.Node) {
	m, ok := (*node).(*ast.MemberNode)
	if !ok || m.Optional || m.Method {
		return
	}
	key, ok := m.Property.(*ast.StringNode)
	if !ok {
		return
	}
	call := &ast.CallNode{Callee: &ast.IdentifierNode{Value: "__get"}, Arguments: []ast.Node{m.Node, &ast.StringNode{Value: key.Value}}}
	ast.Patch(node, call)
}

// get is x.key for mapFetches: a map lookup for maps, expr's own fetch
// (and its error) for anything else.
func get(args ...any) (any, error) {
	if m, ok := args[0].(map[string]any); ok {
		return m[args[1].(string)], nil
	}
	return runtime.Fetch(args[0], args[1]), nil
}

func newCompiler() *compiler {
	c := &compiler{}
	c.opts = []expr.Option{
		expr.Env(exprEnv{}),
		expr.DisableBuiltin("repeat"),
		expr.MaxNodes(maxExpressionNodes),
		expr.Patch(helperCalls{}),
		expr.Patch(mapFetches{}),
		expr.Function("__get", get, new(func(any, string) any)),
	}
	c.opts = append(c.opts, boundedOptions()...)
	c.opts = append(c.opts, pythonOptions()...)
	for name, fn := range helpers {
		fn, name := fn, name
		c.opts = append(c.opts, expr.Function("__"+name, func(args ...any) (any, error) {
			ctx, _ := args[0].(map[string]any)
			if len(args) != 2 {
				return nil, fmt.Errorf("%s takes one argument", name)
			}
			return fn(ctx, args[1:])
		}))
	}
	return c
}

func (c *compiler) compile(src string, asBool bool) (*vm.Program, error) {
	if len(src) > maxExpressionBytes {
		return nil, fmt.Errorf("expression is %d bytes, more than the %d allowed", len(src), maxExpressionBytes)
	}
	if strings.TrimSpace(src) == "" {
		return nil, fmt.Errorf("empty expression")
	}
	key := compiled{src: src, asBool: asBool}
	if r, ok := c.programs[key]; ok {
		return r.prog, r.err
	}
	p, err := c.compileWith(src, asBool, false)
	if err == nil && mayBuild(src) {
		// Checked as written; what runs has its large values bounded (budget.go).
		p, err = c.compileWith(src, asBool, true)
	}
	if err != nil {
		p, err = nil, fmt.Errorf("%s", strings.Join(strings.Fields(err.Error()), " "))
	}
	if c.programs == nil {
		c.programs = map[compiled]compileResult{}
	}
	c.programs[key] = compileResult{p, err}
	return p, err
}

// compileWith is expr.Compile(src, options...) with the configuration of
// those options made once per compiler: the same steps (parse and check,
// optimize, compile) on the same configuration.
func (c *compiler) compileWith(src string, asBool, bounds bool) (*vm.Program, error) {
	config := c.configs[b2i(asBool)][b2i(bounds)]
	if config == nil {
		opts := c.opts[:len(c.opts):len(c.opts)]
		if asBool {
			opts = append(opts, expr.AsBool())
		}
		if bounds {
			opts = append(opts, expr.Patch(bounded{}))
		}
		config = conf.CreateNew()
		for _, op := range opts {
			op(config)
		}
		for name := range config.Disabled {
			delete(config.Builtins, name)
		}
		config.Check()
		c.configs[b2i(asBool)][b2i(bounds)] = config
	}
	tree, err := checker.ParseCheck(src, config)
	if err != nil {
		return nil, err
	}
	if config.Optimize {
		if err := optimizer.Optimize(&tree.Node, config); err != nil {
			var fileError *file.Error
			if errors.As(err, &fileError) {
				return nil, fileError.Bind(tree.Source)
			}
			return nil, err
		}
	}
	return exprcompiler.Compile(tree, config)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// condition compiles a rule condition, which must be a boolean.
func (c *compiler) condition(src string) (*vm.Program, error) { return c.compile(src, true) }

// ---- Templates --------------------------------------------------------------

// A template is text with {{ expression | filter ... }} parts, compiled
// once. Filters: percent, round, upper, lower, json.
type template struct {
	source string
	parts  []tmplPart
	static bool   // no {{ }} part: the text is always static
	text   string // the text of a static template
}

type tmplPart struct {
	text    string      // literal text, when prog is nil
	prog    *vm.Program // an expression
	path    []string    // when the expression is a plain path (context.a.b), read without the VM
	key     string      // the path joined, which runner.lookupPart knows it by
	filters []string
}

var filters = map[string]func(any) (any, error){
	"percent": func(v any) (any, error) {
		f, ok := number(v)
		if !ok {
			return nil, fmt.Errorf("percent needs a number, not %T", v)
		}
		return strconv.FormatFloat(math.Round(f*100), 'f', -1, 64) + "%", nil
	},
	"round": func(v any) (any, error) {
		f, ok := number(v)
		if !ok {
			return nil, fmt.Errorf("round needs a number, not %T", v)
		}
		return math.Round(f), nil
	},
	"upper": func(v any) (any, error) { return strings.ToUpper(text(v)), nil },
	"lower": func(v any) (any, error) { return strings.ToLower(text(v)), nil },
	"json": func(v any) (any, error) {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		return string(b), nil
	},
}

var filterSuffix = regexp.MustCompile(`\|\s*([a-z]+)\s*$`)

func (c *compiler) template(src string) (*template, error) {
	t := &template{source: src}
	rest := src
	for rest != "" {
		open := strings.Index(rest, "{{")
		if open < 0 {
			t.parts = append(t.parts, tmplPart{text: rest})
			break
		}
		if open > 0 {
			t.parts = append(t.parts, tmplPart{text: rest[:open]})
		}
		end := strings.Index(rest[open:], "}}")
		if end < 0 {
			return nil, fmt.Errorf("template %q: {{ without }}", src)
		}
		inner := rest[open+2 : open+end]
		rest = rest[open+end+2:]
		// Trailing "| name" parts naming a filter are filters; anything
		// else (such as ||) belongs to the expression.
		var fs []string
		for {
			m := filterSuffix.FindStringSubmatchIndex(inner)
			if m == nil || filters[inner[m[2]:m[3]]] == nil || strings.HasSuffix(inner[:m[0]], "|") {
				break // not a filter: expr reads the rest (a typo fails to compile)
			}
			fs = append([]string{inner[m[2]:m[3]]}, fs...)
			inner = inner[:m[0]]
		}
		prog, err := c.compile(inner, false)
		if err != nil {
			return nil, fmt.Errorf("template %q: %v", src, err)
		}
		part := tmplPart{prog: prog, filters: fs}
		if p := strings.TrimSpace(inner); simplePath.MatchString(p) {
			part.path, part.key = strings.Split(p, "."), p
		}
		t.parts = append(t.parts, part)
	}
	t.static = true
	for i := range t.parts {
		if t.parts[i].prog != nil {
			t.static = false
		}
		t.text += t.parts[i].text
	}
	if !t.static {
		t.text = ""
	}
	return t, nil
}

// whole reports whether the template is a single {{ }} part, whose value
// keeps its type (a number stays a number).
func (t *template) whole() bool { return len(t.parts) == 1 && t.parts[0].prog != nil }

// value evaluates a whole template to its typed value.
func (t *template) value(r *runner) (any, error) { return t.parts[0].eval(r) }

// render evaluates the template to text. It writes into the runner's
// scratch buffer, so that the text costs one allocation, its own; a
// static template needs no runner (r may be nil).
func (t *template) render(r *runner) (string, error) {
	if t.static {
		return t.text, nil
	}
	buf := r.scratch[:0]
	if cap(buf) < len(t.source)+32 {
		buf = make([]byte, 0, max(len(t.source)+32, 256))
	}
	for i := range t.parts {
		p := &t.parts[i]
		if p.prog == nil {
			buf = append(buf, p.text...)
			continue
		}
		var err error
		if buf, err = p.appendTo(buf, r); err != nil {
			return "", err
		}
	}
	s := string(buf)
	if cap(buf) <= maxScratch {
		r.scratch = buf[:0]
	}
	return s, nil
}

// maxScratch bounds the buffer a pooled runner keeps for rendering.
const maxScratch = 16 << 10

func (p *tmplPart) eval(r *runner) (any, error) { return p.evalFilters(r, p.filters) }

// evalFilters evaluates the part's expression and applies fs, the first
// filters of the part, to its value.
func (p *tmplPart) evalFilters(r *runner, fs []string) (any, error) {
	var err error
	v, ok := r.lookupPart(p)
	if !ok {
		if v, err = r.run(p.prog); err != nil {
			return nil, err
		}
	}
	if err = r.mem.charge(sizeOf(v, memoryBytes)); err != nil {
		return nil, err // the rule's values together stay within the budget (budget.go)
	}
	for _, f := range fs {
		if v, err = filters[f](v); err != nil {
			return nil, err
		}
	}
	return v, nil
}

// appendTo appends the part's text, as appendText(dst, p.eval(r)) does. A
// last filter upper or lower writes its result into dst, without making
// a string of it first.
func (p *tmplPart) appendTo(dst []byte, r *runner) ([]byte, error) {
	n := len(p.filters)
	if n == 0 || (p.filters[n-1] != "upper" && p.filters[n-1] != "lower") {
		v, err := p.eval(r)
		if err != nil {
			return dst, err
		}
		return appendText(dst, v), nil
	}
	v, err := p.evalFilters(r, p.filters[:n-1])
	if err != nil {
		return dst, err
	}
	s, ok := v.(string)
	if !ok {
		s = text(v)
	}
	return appendCase(dst, s, p.filters[n-1] == "upper"), nil
}

// appendCase appends strings.ToUpper(s) (upper) or strings.ToLower(s).
func appendCase(dst []byte, s string, upper bool) []byte {
	start := len(dst)
	dst = append(dst, s...) // ASCII keeps its length: changed in place
	out := dst[start:]
	// Eight ASCII bytes at a time: a byte in [lo, hi] gets its high bit
	// from x+(0x80-lo) and not from x+(0x80-hi-1) (no carry crosses
	// bytes below 0x80), which >>2 makes the case bit 0x20.
	lo, hi := uint64('A'), uint64('Z')
	if upper {
		lo, hi = 'a', 'z'
	}
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	i := 0
	for ; i+8 <= len(out); i += 8 {
		x := binary.LittleEndian.Uint64(out[i:])
		if x&highs != 0 {
			break // not ASCII: the loop below gives up on it
		}
		m := ((x + ones*(0x80-lo)) &^ (x + ones*(0x80-hi-1)) & highs) >> 2
		if upper {
			x -= m
		} else {
			x += m
		}
		binary.LittleEndian.PutUint64(out[i:], x)
	}
	for ; i < len(out); i++ {
		c := out[i]
		if c >= utf8.RuneSelf {
			dst = dst[:start]
			if upper {
				return append(dst, strings.ToUpper(s)...)
			}
			return append(dst, strings.ToLower(s)...)
		}
		if upper && 'a' <= c && c <= 'z' {
			out[i] = c - ('a' - 'A')
		} else if !upper && 'A' <= c && c <= 'Z' {
			out[i] = c + ('a' - 'A')
		}
	}
	return dst
}

// appendText appends text(v) without making a string of it first.
func appendText(dst []byte, v any) []byte {
	switch x := v.(type) {
	case string:
		return append(dst, x...)
	case float64:
		// A whole number (most are: counts, sizes, levels) is its digits,
		// as 'f' writes them; -0 is "-0".
		if x >= -1e15 && x <= 1e15 && x == math.Trunc(x) && (x != 0 || !math.Signbit(x)) {
			return strconv.AppendInt(dst, int64(x), 10)
		}
		return strconv.AppendFloat(dst, x, 'f', -1, 64)
	case int:
		return strconv.AppendInt(dst, int64(x), 10)
	case bool:
		return strconv.AppendBool(dst, x)
	}
	return append(dst, text(v)...)
}

// text renders a value for a message: numbers without a needless ".0",
// strings as they are, everything else as JSON.
func text(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case int:
		return strconv.Itoa(x)
	case nil:
		return "null"
	case bool:
		return strconv.FormatBool(x)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// ---- Values with templates (set_state value, payloads, tool arguments) ----

// valueTmpl is a JSON-like value in which every string may be a template.
type valueTmpl struct {
	literal any
	tmpl    *template
	object  map[string]*valueTmpl
	array   []*valueTmpl
	dynamic bool // holds a template: eval needs a runner
}

func (c *compiler) value(v any) (*valueTmpl, error) {
	switch x := v.(type) {
	case string:
		if !strings.Contains(x, "{{") {
			return &valueTmpl{literal: x}, nil
		}
		t, err := c.template(x)
		if err != nil {
			return nil, err
		}
		return &valueTmpl{tmpl: t, dynamic: true}, nil
	case map[string]any:
		out := &valueTmpl{object: map[string]*valueTmpl{}}
		for k, e := range x {
			ev, err := c.value(e)
			if err != nil {
				return nil, err
			}
			out.object[k] = ev
			out.dynamic = out.dynamic || ev.dynamic
		}
		return out, nil
	case []any:
		out := &valueTmpl{array: []*valueTmpl{}}
		for _, e := range x {
			ev, err := c.value(e)
			if err != nil {
				return nil, err
			}
			out.array = append(out.array, ev)
			out.dynamic = out.dynamic || ev.dynamic
		}
		return out, nil
	}
	return &valueTmpl{literal: normalise(v)}, nil
}

// normalise turns TOML's numbers and dates into JSON's.
func normalise(v any) any {
	switch x := v.(type) {
	case int64:
		return float64(x)
	case int:
		return float64(x)
	case json.Number:
		f, _ := x.Float64()
		return f
	case nil, bool, float64, string:
		return x
	}
	return fmt.Sprint(v)
}

// evalLazy evaluates the value, asking run for a runner only when the
// value holds a template.
func (v *valueTmpl) evalLazy(run func() *runner) (any, error) {
	if !v.dynamic {
		return v.eval(nil)
	}
	return v.eval(run())
}

func (v *valueTmpl) eval(r *runner) (any, error) {
	switch {
	case v.tmpl != nil:
		if v.tmpl.whole() {
			return v.tmpl.value(r)
		}
		return v.tmpl.render(r)
	case v.object != nil:
		out := make(map[string]any, len(v.object))
		for k, e := range v.object {
			x, err := e.eval(r)
			if err != nil {
				return nil, err
			}
			out[k] = x
		}
		return out, nil
	case v.array != nil:
		out := make([]any, 0, len(v.array))
		for _, e := range v.array {
			x, err := e.eval(r)
			if err != nil {
				return nil, err
			}
			out = append(out, x)
		}
		return out, nil
	}
	return v.literal, nil
}

// ---- Actions ----------------------------------------------------------------

// Action kinds (SPEC §7.4).
const (
	ActNotify   = "notify_self"
	ActLog      = "log"
	ActSetState = "set_state"
	ActEmit     = "emit_event"
	ActDeny     = "deny"
	ActCallTool = "call_tool"
	ActLua      = "lua" // runs a Lua script (lua = "..." or script = "file.lua")
	// The decisions beyond deny (decide.go): hold a call for a person's
	// approval, change its arguments (or a chat's prompt), refuse a result
	// or an answer, cut parts out of one.
	ActAsk     = "ask"
	ActRewrite = "rewrite"
	ActBlock   = "block"
	ActRedact  = "redact"
)

var notifyPriorities = map[string]bool{"low": true, "normal": true, "high": true, "critical": true}
var logLevels = map[string]bool{"debug": true, "info": true, "warn": true, "error": true}

type action struct {
	kind     string
	message  *template // notify_self, log
	reason   *template // deny
	priority string    // notify_self
	level    string    // log
	key      string    // set_state
	value    *valueTmpl
	event    string          // emit_event
	payload  *valueTmpl      // emit_event
	tool     string          // call_tool
	args     *valueTmpl      // call_tool; rewrite: the new arguments
	script   *rulelua.Script // lua; rewrite and redact written in Lua
	prompt   *template       // rewrite on on_chat_start: the new prompt
	merge    bool            // rewrite: args are merged into the call's own
	patterns []*regexp.Regexp
	replace  string // redact: what a match becomes
	// log: the level parsed, and the line's start (`rule "id": `); the
	// whole line when the message is static. Set by Load; an action
	// without them formats its line.
	logLevel  logging.Level
	logPrefix string
	logLine   string
	// notify_self: the notice waits in the session's queue until this
	// event fires there, and at least this long (protocol.Notice).
	deliverOn      string
	deliverAfterMS int
}

// canonical returns the one of names equal to s, else s.
func canonical(s string, names ...string) string {
	for _, n := range names {
		if n == s {
			return n
		}
	}
	return s
}

// actionKeys are the keys each action type takes.
var actionKeys = map[string][]string{
	ActNotify: {"message", "priority", "deliver_on", "deliver_after_ms"}, ActLog: {"message", "level"}, ActSetState: {"key", "value"},
	ActEmit: {"event", "payload"}, ActDeny: {"reason"}, ActCallTool: {"tool", "arguments"},
	ActLua: {"lua", "script"},
	ActAsk: {"reason"}, ActBlock: {"reason"},
	ActRewrite: {"arguments", "prompt", "merge", "lua", "script"},
	ActRedact:  {"patterns", "replacement", "lua", "script"},
}

// checkActionKeys refuses an unknown action type, or a key its type does
// not take.
func checkActionKeys(d *actionDoc) error {
	allowed, ok := actionKeys[d.Type]
	if !ok {
		return fmt.Errorf("unknown action type %q (notify_self, log, set_state, emit_event, deny, ask, rewrite, block, redact, call_tool, lua)", d.Type)
	}
	// In the order of their names (the first one refused is reported).
	given := [...]struct {
		key string
		set bool
	}{
		{"arguments", d.Arguments != nil}, {"event", d.Event != nil}, {"key", d.Key != nil}, {"level", d.Level != nil},
		{"lua", d.Lua != nil}, {"merge", d.Merge != nil}, {"message", d.Message != nil}, {"patterns", d.Patterns != nil},
		{"payload", d.Payload != nil}, {"priority", d.Priority != nil}, {"prompt", d.Prompt != nil}, {"reason", d.Reason != nil},
		{"replacement", d.Replacement != nil}, {"script", d.Script != nil}, {"tool", d.Tool != nil}, {"value", d.Value != nil},
	}
	for _, g := range given {
		if g.set && !slices.Contains(allowed, g.key) {
			return fmt.Errorf("%s does not take %q (it takes %s)", d.Type, g.key, strings.Join(allowed, ", "))
		}
	}
	return nil
}

func (c *compiler) compileAction(src Source, trigger string, d *actionDoc) (action, error) {
	a := action{kind: d.Type}
	if err := checkActionKeys(d); err != nil {
		return a, err
	}
	if (d.DeliverOn != nil || d.DeliverAfterMS != nil) && d.Type != ActNotify {
		return a, fmt.Errorf("%s does not take deliver_on or deliver_after_ms (notify_self does)", d.Type)
	}
	// The kind, priority and level are the package's own strings, not
	// the file's: an answer writes each once and copies it (written).
	a.kind = canonical(d.Type, ActNotify, ActLog, ActSetState, ActEmit, ActDeny, ActCallTool, ActLua, ActAsk, ActRewrite, ActBlock, ActRedact)
	if err := checkDecisionTrigger(a.kind, trigger); err != nil {
		return a, err
	}
	var err error
	switch d.Type {
	case ActNotify:
		if d.Message == nil {
			return a, fmt.Errorf("message is missing")
		}
		a.priority = "normal"
		if d.Priority != nil {
			if !notifyPriorities[*d.Priority] {
				return a, fmt.Errorf("priority %q: use low, normal, high or critical", *d.Priority)
			}
			a.priority = canonical(*d.Priority, "low", "normal", "high", "critical")
		}
		if a.deliverOn, a.deliverAfterMS, err = deliveryOf(d.DeliverOn, d.DeliverAfterMS); err != nil {
			return a, err
		}
		a.message, err = c.template(*d.Message)
	case ActLog:
		if d.Message == nil {
			return a, fmt.Errorf("message is missing")
		}
		a.level = "info"
		if d.Level != nil {
			if !logLevels[*d.Level] {
				return a, fmt.Errorf("level %q: use debug, info, warn or error", *d.Level)
			}
			a.level = canonical(*d.Level, "debug", "info", "warn", "error")
		}
		a.message, err = c.template(*d.Message)
	case ActSetState:
		if d.Key == nil || *d.Key == "" || d.Value == nil {
			return a, fmt.Errorf("key and value are required")
		}
		a.key = *d.Key
		a.value, err = c.value(d.Value)
	case ActEmit:
		if d.Event == nil || !ValidEventName(*d.Event) {
			return a, fmt.Errorf("event must be an event name ([a-z][a-z0-9_.]*)")
		}
		a.event = *d.Event
		if d.Payload != nil {
			a.payload, err = c.value(d.Payload)
		}
	case ActDeny, ActAsk, ActBlock:
		if d.Reason == nil {
			return a, fmt.Errorf("reason is missing")
		}
		a.reason, err = c.template(*d.Reason)
	case ActRewrite:
		err = c.compileRewrite(src, trigger, d, &a)
	case ActRedact:
		err = c.compileRedact(src, d, &a)
	case ActCallTool:
		if d.Tool == nil || *d.Tool == "" {
			return a, fmt.Errorf("tool is missing")
		}
		a.tool = *d.Tool
		if d.Arguments != nil {
			a.args, err = c.value(d.Arguments)
		}
	case ActLua:
		if (d.Lua == nil) == (d.Script == nil) {
			return a, fmt.Errorf("give one of lua (inline) or script (a file)")
		}
		a.script, _, err = luaSource(src, d.Lua, d.Script, "action", c.lua)
	}
	return a, err
}

// maxDeliverAfterMS bounds a notice's deliver_after_ms: a day.
const maxDeliverAfterMS = 86400000

// deliveryOf checks a notice's deferred delivery: deliver_on names an
// event, not one of the tool pipeline's (those fire on every call, which
// must not look for held notices), and deliver_after_ms is 1 to a day.
func deliveryOf(on *string, afterMS *int) (string, int, error) {
	var event string
	var ms int
	if on != nil {
		event = *on
		if !ValidEventName(event) {
			return "", 0, fmt.Errorf("deliver_on %q is not an event name ([a-z][a-z0-9_.]*)", event)
		}
		if strings.HasPrefix(event, "on_tool_") {
			return "", 0, fmt.Errorf("deliver_on %q: a notice cannot wait for a tool event (on_tool_*); on_turn_start, on_turn_end or an event of your own can", event)
		}
	}
	if afterMS != nil {
		ms = *afterMS
		if ms < 1 || ms > maxDeliverAfterMS {
			return "", 0, fmt.Errorf("deliver_after_ms must be 1 to %d, not %d", maxDeliverAfterMS, ms)
		}
	}
	return event, ms, nil
}

// CheckDelivery checks a notice's deliver_on and deliver_after_ms (zero:
// not given) as a notify_self action's are checked: for the notices of
// a Lua tool and of a host's rule action.
func CheckDelivery(on string, afterMS int) error {
	var pon *string
	var pafter *int
	if on != "" {
		pon = &on
	}
	if afterMS != 0 {
		pafter = &afterMS
	}
	_, _, err := deliveryOf(pon, pafter)
	return err
}
