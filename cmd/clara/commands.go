package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/clara-lib/clara/core"
	"github.com/clara-lib/clara/core/toolbox"
	"github.com/clara-lib/clara/core/tools"
)

// withEngine wraps a command's work: the engine is built first (exit 2 on
// a bad configuration).
func withEngine(env *environment, run func(cmd *cobra.Command, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if err := env.start(); err != nil {
			return err
		}
		return run(cmd, args)
	}
}

func chatCommand(env *environment) *cobra.Command {
	var (
		allowTools, verbose, stream, ask bool
		maxToolCalls                     int
		toolNames                        []string
		session, model, resultSchema     string
	)
	c := &cobra.Command{
		Use:   "chat PROMPT...",
		Short: "Ask the configured model (the chat tool); prints the answer",
		Long: `Ask the configured model ([llm] of the configuration) through the chat tool,
and print its answer. The words of PROMPT are joined by spaces; put -- before
a prompt that starts with a dash.

With --allow-tools the model may call tools (all the calls of the chat may
reach, or those --tools names), each through Clara's policy, rules and
limits. --verbose shows each tool call on stderr, --stream prints the answer
as it arrives, --ask lets the model ask you (the question on stderr, your
answer one line of stdin, a JSON object for a form) and asks you about
each call a rule or a tool holds for approval: y runs it, n [REASON] does
not, e ARGUMENTS runs it with the arguments you give. --result-schema asks for a JSON result of that
schema, printed instead of the answer's text.`,
		Example: `  clara chat "What time is it in Tokyo?" --allow-tools --tools get_time --verbose
  clara chat --session s1 "Remember: my name is Ada."
  clara chat "Book me a table" --allow-tools --ask --result-schema '{"type":"object"}'
  clara chat -- "-h is not a flag here"`,
		Args: cobra.MinimumNArgs(1),
		RunE: withEngine(env, func(cmd *cobra.Command, args []string) error {
			arguments := map[string]any{"prompt": strings.Join(args, " ")}
			if allowTools {
				arguments["allow_tools"] = true
			}
			if cmd.Flags().Changed("max-tool-calls") {
				arguments["max_tool_calls"] = maxToolCalls
			}
			if len(toolNames) > 0 {
				arguments["tools"] = toolNames
			}
			if model != "" {
				arguments["model"] = model
			}
			if stream {
				arguments["stream"] = true
			}
			typed := resultSchema != ""
			if typed {
				var schema map[string]any
				if err := json.Unmarshal([]byte(resultSchema), &schema); err != nil {
					return usageError("--result-schema must be a JSON Schema object: %v", err)
				}
				arguments["result_schema"] = schema
			}
			if verbose || (stream && !env.json) {
				env.engine.SetEventSink(progressPrinter(env, verbose, stream && !env.json))
				defer env.engine.SetEventSink(nil)
			}
			if ask {
				defer newTerminal(env).install()()
			}
			request := map[string]any{"tool": "chat", "arguments": arguments}
			if session != "" {
				request["session"] = session
			}
			out, raw := env.call(request)
			if stream && !env.json {
				fmt.Fprintln(env.stdout) // the streamed answer's end
			}
			return env.finish(out, raw, func(out envelope) {
				var result struct {
					Content string          `json:"content"`
					Result  json.RawMessage `json:"result"`
				}
				_ = json.Unmarshal(out.Result, &result)
				switch {
				case typed:
					fmt.Fprintln(env.stdout, compact(result.Result))
				case !stream:
					fmt.Fprintln(env.stdout, result.Content)
				}
			})
		}),
	}
	f := c.Flags()
	f.BoolVar(&allowTools, "allow-tools", false, "let the model call tools")
	f.IntVar(&maxToolCalls, "max-tool-calls", 0, "at most `N` tool calls in this chat (the configuration's limits.max_tool_calls when not given)")
	f.StringSliceVar(&toolNames, "tools", nil, "the tools the model may call, comma-separated (`a,b`; default: all it may reach)")
	f.StringVar(&session, "session", "", "the `SESSION` the chat runs in (its conversation, policy and state)")
	f.StringVar(&model, "model", "", "the `MODEL` to ask instead of llm.model")
	f.BoolVarP(&verbose, "verbose", "v", false, "show each tool call and its result on stderr")
	f.BoolVar(&stream, "stream", false, "print the answer as it arrives")
	f.BoolVar(&ask, "ask", false, "let the model ask you questions (ask_user) and ask you to approve the calls rules hold: on stderr, answered on stdin")
	f.StringVar(&resultSchema, "result-schema", "", "a JSON Schema `OBJECT` the result must match; the result is printed as JSON")
	_ = c.RegisterFlagCompletionFunc("tools", completeToolNames(env))
	return c
}

// progressPrinter shows a chat as it runs: the seed's status lines on
// stderr (↪ tool: NAME(ARGS…), ✔ tool result received: NAME (34ms), ✗ on
// failure) with --verbose, the answer's text as it streams with --stream.
func progressPrinter(env *environment, verbose, stream bool) func([]byte) {
	var mu sync.Mutex
	return func(raw []byte) {
		var ev struct {
			Event, Text, Tool, Status string
			Arguments                 json.RawMessage
			DurationMS                float64 `json:"duration_ms"`
		}
		if json.Unmarshal(raw, &ev) != nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		switch {
		case ev.Event == "token" && stream:
			fmt.Fprint(env.stdout, ev.Text)
		case ev.Event == "tool_call" && verbose:
			fmt.Fprintf(env.stderr, "↪ tool: %s(%s)\n", ev.Tool, shorten(string(ev.Arguments), 60))
		case ev.Event == "tool_result" && verbose && ev.Status == "success":
			fmt.Fprintf(env.stderr, "✔ tool result received: %s (%s)\n", ev.Tool, durationText(ev.DurationMS))
		case ev.Event == "tool_result" && verbose:
			fmt.Fprintf(env.stderr, "✗ tool %s failed: %s (%s)\n", ev.Tool, ev.Status, durationText(ev.DurationMS))
		}
	}
}

// durationText is a status line's duration: milliseconds from one on,
// microseconds below (a built-in tool answers in a few: "(0s)" told
// nothing).
func durationText(ms float64) string {
	d := time.Duration(ms * float64(time.Millisecond))
	if d < time.Millisecond {
		return strconv.FormatInt(d.Round(time.Microsecond).Microseconds(), 10) + "µs"
	}
	return d.Round(time.Millisecond).String()
}

// terminal is the person at the terminal for --ask: ask_user's questions
// and the approvals rules ask for, one after the other, on stderr, each
// answered by one line of stdin.
type terminal struct {
	env   *environment
	mu    sync.Mutex
	lines *bufio.Reader
}

func newTerminal(env *environment) *terminal {
	return &terminal{env: env, lines: bufio.NewReader(env.stdin)}
}

// install makes the terminal the engine's input handler and approver
// until the returned function runs.
func (t *terminal) install() (remove func()) {
	t.env.engine.SetInputHandler(t.input)
	t.env.engine.SetApprover(core.ApproverFunc(t.approve))
	return func() {
		t.env.engine.SetInputHandler(nil)
		t.env.engine.SetApprover(nil)
	}
}

// readLine reads one answer; ok is false at the end of input.
func (t *terminal) readLine() (string, bool) {
	line, err := t.lines.ReadString('\n')
	if err != nil && line == "" {
		fmt.Fprintln(t.env.stderr)
		return "", false
	}
	return strings.TrimRight(line, "\r\n"), true
}

// input answers ask_user: the question on stderr, the answer one line of
// stdin; end of input declines. A form (the question has a schema) is
// answered by one JSON or JSON5 object, checked against the form here: an
// answer that does not fit is said and asked again.
func (t *terminal) input(request []byte) (string, bool) {
	var q struct {
		Prompt string
		Schema json.RawMessage
	}
	if json.Unmarshal(request, &q) != nil {
		return "", false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(q.Schema) == 0 {
		fmt.Fprintf(t.env.stderr, "? %s\n> ", q.Prompt)
		return t.readLine()
	}
	form, err := toolbox.CompileValueSchema("the form", q.Schema)
	if err != nil {
		return "", false // the engine refuses such a form before it asks
	}
	fmt.Fprintf(t.env.stderr, "? %s\n  answer with a JSON object: %s\n", q.Prompt, formFields(q.Schema))
	for {
		fmt.Fprint(t.env.stderr, "> ")
		line, ok := t.readLine()
		if !ok {
			return "", false
		}
		answer := []byte(strings.TrimSpace(line))
		if !json.Valid(answer) {
			relaxed, err := t.env.engine.JSON5(answer)
			if err != nil {
				fmt.Fprintf(t.env.stderr, "  not a JSON object: %v\n", err)
				continue
			}
			answer = relaxed
		}
		if len(answer) == 0 || answer[0] != '{' {
			fmt.Fprintln(t.env.stderr, "  not a JSON object")
			continue
		}
		if perr := form.Check(answer); perr != nil {
			fmt.Fprintf(t.env.stderr, "  %s\n", perr.Message)
			continue
		}
		return string(answer), true
	}
}

// formFields names a form's fields for the person: {name (string,
// required), age (integer)}.
func formFields(schema json.RawMessage) string {
	var f struct {
		Properties map[string]struct {
			Type string `json:"type"`
		}
		Required []string
	}
	if json.Unmarshal(schema, &f) != nil || len(f.Properties) == 0 {
		return string(schema)
	}
	names := make([]string, 0, len(f.Properties))
	for name := range f.Properties {
		names = append(names, name)
	}
	sort.Strings(names)
	required := map[string]bool{}
	for _, r := range f.Required {
		required[r] = true
	}
	var b strings.Builder
	b.WriteString("{")
	for i, name := range names {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(name)
		kind := f.Properties[name].Type
		if required[name] {
			kind = strings.TrimPrefix(kind+", required", ", ")
		}
		if kind != "" {
			b.WriteString(" (" + kind + ")")
		}
	}
	return b.String() + "}"
}

// approve asks the person about a call held for approval (a rule's ask, a
// tool's needs_approval): y approves, n [REASON] rejects, e ARGUMENTS
// approves with edited arguments (JSON or JSON5), checked against the
// tool's schema before the call runs: a bad edit is said and asked again.
// End of input rejects.
func (t *terminal) approve(ctx context.Context, req *core.ApprovalRequest) (core.ApprovalDecision, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if ctx.Err() != nil {
		return core.ApprovalDecision{}, false // decided elsewhere, or timed out, while another question was on
	}
	why := req.Reason
	if req.Rule != "" {
		why = fmt.Sprintf("rule %s: %s", req.Rule, req.Reason)
	}
	fmt.Fprintf(t.env.stderr, "? approve %s(%s)? %s\n  y: run it  n [REASON]: do not  e ARGUMENTS: run it with these arguments\n",
		req.Tool, shorten(string(req.Arguments), 200), why)
	for {
		fmt.Fprint(t.env.stderr, "> ")
		line, ok := t.readLine()
		if !ok {
			return core.ApprovalDecision{Reason: "no answer at the terminal (end of input)", By: "terminal"}, true
		}
		if ctx.Err() != nil {
			fmt.Fprintln(t.env.stderr, "(no longer waiting: decided elsewhere or timed out)")
			return core.ApprovalDecision{}, false
		}
		word, rest, _ := strings.Cut(strings.TrimSpace(line), " ")
		rest = strings.TrimSpace(rest)
		switch strings.ToLower(word) {
		case "y", "yes":
			return core.ApprovalDecision{Approve: true, By: "terminal"}, true
		case "n", "no":
			if rest == "" {
				rest = "rejected at the terminal"
			}
			return core.ApprovalDecision{Reason: rest, By: "terminal"}, true
		case "e", "edit":
			args := []byte(rest)
			if !json.Valid(args) {
				relaxed, err := t.env.engine.JSON5(args)
				if err != nil {
					fmt.Fprintf(t.env.stderr, "  the arguments are not JSON: %v\n", err)
					continue
				}
				args = relaxed
			}
			// Decided here, so that a bad edit is said and asked again
			// rather than rejecting the call.
			switch err := t.env.engine.DecideApproval(req.ID, core.ApprovalDecision{Approve: true, Arguments: args, By: "terminal"}); {
			case err == nil:
				return core.ApprovalDecision{}, false
			case errors.Is(err, core.ErrNoApproval):
				fmt.Fprintln(t.env.stderr, "(no longer waiting: decided elsewhere or timed out)")
				return core.ApprovalDecision{}, false
			default:
				fmt.Fprintf(t.env.stderr, "  %v\n", err)
			}
		default:
			fmt.Fprintln(t.env.stderr, "  answer y, n [REASON] or e ARGUMENTS")
		}
	}
}

func shorten(s string, n int) string {
	if len([]rune(s)) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "…"
}

// compact is a JSON value on one line, as the envelope has it.
func compact(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

func callCommand(env *environment) *cobra.Command {
	var session string
	var trace, ask bool
	c := &cobra.Command{
		Use:   "call TOOL [ARGUMENTS]",
		Short: "Call a tool; prints its result",
		Long: `Call a tool through the whole pipeline (policy, rules, validation, limits,
audit) and print its result as JSON. ARGUMENTS is a JSON object (default {}),
or a JSON5 one as people write it by hand ({expression: '6*7'}).

--trace asks for the request's trace and prints it on stderr: how each
policy layer decided, then every rule evaluated around the call, whether it
matched, what its actions did, and how long it took in microseconds.
--json prints the whole envelope (trace and notices included) instead.
--ask asks you, on stderr, about a call a rule or the tool holds for
approval (y runs it, n [REASON] does not, e ARGUMENTS runs it with the
arguments you give, one line of stdin), and answers ask_user.`,
		Example: `  clara call math_eval '{"expression":"6*7"}'
  clara call math_eval "{expression: '6*7'}"
  clara call get_time '{"timezone":"Asia/Tokyo"}' --session s1
  clara call echo '{"message":"hi"}' --trace
  clara call transfer '{"to":"bob","amount":5000}' --ask
  clara call nonexistent --json`,
		Args: cobra.RangeArgs(1, 2),
		RunE: withEngine(env, func(cmd *cobra.Command, args []string) error {
			request := map[string]any{"tool": args[0]}
			if len(args) == 2 {
				arguments := []byte(args[1])
				if !json.Valid(arguments) {
					// Written by hand: JSON5 too ({n: 'x'}, docs/protocol.md).
					relaxed, err := env.engine.JSON5(arguments)
					if err != nil {
						var v any
						strict := json.Unmarshal(arguments, &v)
						return usageError("the arguments are not JSON: %v; nor %v", strict, err)
					}
					arguments = relaxed
				}
				request["arguments"] = json.RawMessage(arguments)
			}
			if session != "" {
				request["session"] = session
			}
			if trace {
				request["trace"] = true
			}
			if ask {
				defer newTerminal(env).install()()
			}
			out, raw := env.call(request)
			if trace && !env.json {
				printTrace(env.stderr, out.Trace)
			}
			return env.finish(out, raw, func(out envelope) {
				fmt.Fprintln(env.stdout, string(out.Result))
			})
		}),
		ValidArgsFunction: func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
			if len(args) > 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			return completeToolNames(env)(cmd, args, toComplete)
		},
	}
	c.Flags().StringVar(&session, "session", "", "the `SESSION` the call belongs to")
	c.Flags().BoolVar(&trace, "trace", false, "print how the policy and the rules decided, on stderr")
	c.Flags().BoolVar(&ask, "ask", false, "ask you to approve the call when a rule or the tool holds it, and answer ask_user: on stderr, answered on stdin")
	return c
}

// completeToolNames completes the names of the tools of the configuration.
func completeToolNames(env *environment) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		if env.start() != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		out, _ := env.call(map[string]any{"tool": "tools_list"})
		var list struct {
			Tools []struct {
				Name        string `json:"name"`
				Description string `json:"description"`
			} `json:"tools"`
		}
		_ = json.Unmarshal(out.Result, &list)
		var names []string
		for _, t := range list.Tools {
			names = append(names, t.Name+"\t"+shorten(t.Description, 50))
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	}
}

// traceEntry is one entry of a request's trace: a policy layer's verdict
// ({"policy","allowed","reason"}) or a rule's ({"rule","event",...}).
type traceEntry struct {
	Policy     *string          `json:"policy"`
	Allowed    bool             `json:"allowed"`
	Reason     string           `json:"reason"`
	Rule       string           `json:"rule"`
	Event      string           `json:"event"`
	Matched    bool             `json:"matched"`
	Value      json.RawMessage  `json:"value"`
	Error      string           `json:"error"`
	DurationUS int64            `json:"duration_us"`
	Actions    []map[string]any `json:"actions"`
	Skipped    string           `json:"skipped"`
}

// printTrace writes a trace for people:
//
//	policy  the configuration: allowed
//	rule    slow-tool on on_tool_complete: matched (true), 12 µs
//	          notify_self: message "echo took 3 ms", priority normal
func printTrace(w interface{ Write([]byte) (int, error) }, trace []traceEntry) {
	fmt.Fprintln(w, "trace:")
	if len(trace) == 0 {
		fmt.Fprintln(w, "  (no policy layer and no rule had a say)")
	}
	for _, t := range trace {
		if t.Policy != nil {
			verdict := "allowed"
			if !t.Allowed {
				verdict = "denied"
			}
			if t.Reason != "" {
				verdict += " (" + t.Reason + ")"
			}
			fmt.Fprintf(w, "  policy  %s: %s\n", *t.Policy, verdict)
			continue
		}
		if t.Rule == "" { // an emission's own problem (its state not saved)
			fmt.Fprintf(w, "  %s: %s\n", t.Event, t.Error)
			continue
		}
		verdict := "not matched"
		if t.Matched {
			verdict = "matched"
		}
		if len(t.Value) > 0 {
			verdict += " (" + compact(t.Value) + ")"
		}
		if t.Error != "" {
			verdict += ": " + strings.ReplaceAll(t.Error, "\n", " ")
		}
		if t.Skipped != "" {
			verdict += ", skipped: " + t.Skipped
		}
		fmt.Fprintf(w, "  rule    %s on %s: %s, %d µs\n", t.Rule, t.Event, verdict, t.DurationUS)
		for _, a := range t.Actions {
			fmt.Fprintf(w, "            %s\n", describeAction(a))
		}
	}
}

// describeAction is an action record as one line: its type, then its
// other fields in name order.
func describeAction(a map[string]any) string {
	var keys []string
	for k := range a {
		if k != "type" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		v, _ := json.Marshal(a[k])
		parts = append(parts, k+" "+string(v))
	}
	return fmt.Sprintf("%v: %s", a["type"], strings.Join(parts, ", "))
}

// The formats of tools_list.
var toolFormats = []string{tools.FormatClara, tools.FormatOpenAI, tools.FormatAnthropic, tools.FormatMCP}

func toolsCommand(env *environment) *cobra.Command {
	var format string
	var all bool
	c := &cobra.Command{
		Use:   "tools",
		Short: "List the tools (tools_list), as Clara descriptors or in a model's format",
		Long: `List the tools of the configuration, as Clara's descriptors or in the format
a model or an MCP client takes them. --format is one of ` + strings.Join(toolFormats, ", ") + `.
The formats of models list only the tools a model may see, unless --all.`,
		Example: `  clara tools
  clara tools --format openai
  clara tools --format mcp --all`,
		Args: cobra.NoArgs,
		RunE: withEngine(env, func(cmd *cobra.Command, args []string) error {
			if !contains(toolFormats, format) {
				return usageError("--format %q: choose one of %s", format, strings.Join(toolFormats, ", "))
			}
			arguments := map[string]any{"format": format}
			if all {
				arguments["llm_visible_only"] = false
			}
			out, raw := env.call(map[string]any{"tool": "tools_list", "arguments": arguments})
			return env.finish(out, raw, func(out envelope) {
				var b bytes.Buffer
				if json.Indent(&b, out.Result, "", "  ") != nil {
					b.Write(out.Result)
				}
				fmt.Fprintln(env.stdout, b.String())
			})
		}),
	}
	c.Flags().StringVar(&format, "format", tools.FormatClara, "the list's format: one of "+strings.Join(toolFormats, ", "))
	c.Flags().BoolVar(&all, "all", false, "in a model's format, list the tools hidden from models too")
	_ = c.RegisterFlagCompletionFunc("format", cobra.FixedCompletions(toolFormats, cobra.ShellCompDirectiveNoFileComp))
	return c
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func versionCommand(env *environment) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version (as --version does)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if env.json {
				fmt.Fprintf(env.stdout, "{\"version\":%q}\n", core.Version)
				return nil
			}
			fmt.Fprintf(env.stdout, "clara %s\n", core.Version)
			return nil
		},
	}
}
