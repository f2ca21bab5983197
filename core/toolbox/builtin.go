package toolbox

// Builtin declares a tool shipped with Clara. Every built-in tool — the
// toolbox's own, the engine's, the rules', the callbacks' — is one Builtin
// value; Tool turns it into a registered tool.
type Builtin struct {
	Name         string
	Description  string
	Schema       string   // JSON Schema of the arguments; "" accepts any object
	Capabilities []string // what test mode and policy look at
	LLMVisible   bool     // offered to models and MCP clients
	// Admin marks an administrative tool (rules, state, callbacks, session
	// policy): out of reach of nested calls and of on_tool_call rules unless
	// the configuration says otherwise, so that nothing a rule, a script or
	// a model does can lock the host out.
	Admin bool
	// MaxOutputBytes is the tool's own output cap, for tools whose answers
	// can exceed the configured default (0: the default).
	MaxOutputBytes int
	// TimeoutMS is the tool's own deadline, for tools that wait on models
	// or the network longer than the configured default (0: the default).
	TimeoutMS int
	// Timed tools run under the call's deadline on a goroutine of their own
	// (they may wait on the network); the others are trusted Go functions
	// that return promptly and run inline.
	Timed bool
	// KeepsNothing: Run neither keeps nor passes on its context, its
	// arguments or anything reached through them once it returns, and
	// makes no nested call. The engine may then reuse the call's state for
	// the next request (see core's requestState): the echo.
	KeepsNothing bool
	// Hints are what the tool declares of itself to MCP clients
	// (Declared): every built-in declares them, since MCP's defaults
	// (not read-only, destructive) are wrong for most of them.
	Hints *Annotations
	// Offered: see Tool.Offered; nil when the tool can always answer.
	Offered func() bool
	Run     Func
}

// Tool builds the registered tool.
func (b Builtin) Tool() (*Tool, error) {
	d := Descriptor{Name: b.Name, Description: b.Description, Returns: ReturnsJSON, Capabilities: b.Capabilities,
		LLMVisible: b.LLMVisible, Limits: Limits{MaxOutputBytes: b.MaxOutputBytes, TimeoutMS: b.TimeoutMS}, Annotations: b.Hints}
	if b.Schema != "" {
		d.InputSchema = []byte(b.Schema)
	}
	t, err := NewTool(d, ToolOptions{Run: b.Run, Builtin: true, Inline: !b.Timed})
	if err != nil {
		return nil, err
	}
	t.Admin, t.Offered = b.Admin, b.Offered
	t.KeepsNothing = b.KeepsNothing && !b.Timed
	return t, nil
}
