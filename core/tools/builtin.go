package tools

import (
	"context"
	"strconv"
	"time"
	_ "time/tzdata" // IANA names work on hosts without /usr/share/zoneinfo

	"github.com/tidwall/gjson"

	"github.com/clara-lib/clara/core/protocol"
	"github.com/clara-lib/clara/core/toolbox"
)

// Deps are the engine services some built-in tools need.
type Deps struct {
	Now      func() time.Time  // the clock of get_time; time.Now when nil
	Registry *toolbox.Registry // for tools_list
	Audit    *toolbox.Audit    // for audit_tail
	KV       *KV               // for kv_*
	Sessions SessionPolicies   // for session_policy
}

// SessionPolicies keeps each session's policy layer.
type SessionPolicies interface {
	// NarrowSessionPolicy narrows session's layer by p and returns the result.
	NarrowSessionPolicy(session string, p *toolbox.Policy) *toolbox.Policy
}

// Builtins returns every built-in tool, ready to register.
func Builtins(d Deps) ([]*toolbox.Tool, error) {
	if d.Now == nil {
		d.Now = time.Now
	}
	makers := []func() (*toolbox.Tool, error){
		Echo,
		func() (*toolbox.Tool, error) { return GetTime(d.Now) },
		func() (*toolbox.Tool, error) { return kvSet(d.KV) },
		func() (*toolbox.Tool, error) { return kvGet(d.KV) },
		func() (*toolbox.Tool, error) { return kvDelete(d.KV) },
		func() (*toolbox.Tool, error) { return kvList(d.KV) },
		MathEval,
		func() (*toolbox.Tool, error) { return toolsList(d.Registry) },
		func() (*toolbox.Tool, error) { return auditTail(d.Audit) },
		func() (*toolbox.Tool, error) { return sessionPolicy(d.Sessions) },
	}
	out := make([]*toolbox.Tool, 0, len(makers))
	for _, m := range makers {
		t, err := m()
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

// builtin builds a built-in tool from its descriptor fields.
func builtin(name, description, schema string, llmVisible bool, run toolbox.Func) (*toolbox.Tool, error) {
	return builtinMaxOut(0, name, description, schema, llmVisible, run)
}

// builtinMaxOut is builtin with its own max_output_bytes, for tools whose
// documented answers can exceed the configured default (0: the default).
func builtinMaxOut(maxOut int, name, description, schema string, llmVisible bool, run toolbox.Func) (*toolbox.Tool, error) {
	d := toolbox.Descriptor{Name: name, Description: description, LLMVisible: llmVisible, Returns: toolbox.ReturnsJSON,
		Limits: toolbox.Limits{MaxOutputBytes: maxOut}}
	if schema != "" {
		d.InputSchema = []byte(schema)
	}
	return toolbox.NewTool(d, toolbox.ToolOptions{Run: run, Builtin: true, Inline: true})
}

// Echo returns its arguments as its result. It is the default evaluator
// out of the box, and the cheapest path through the pipeline.
func Echo() (*toolbox.Tool, error) {
	return builtin("echo", "Returns its arguments unchanged.", "", true,
		func(_ context.Context, call toolbox.Call) ([]byte, error) {
			return call.Arguments, nil
		})
}

// isoMillis is ISO 8601 with milliseconds and a numeric offset (+00:00
// rather than Z, so every answer has the same shape).
const isoMillis = "2006-01-02T15:04:05.000-07:00"

// GetTime answers the current time: {"time": ISO 8601 with offset,
// "timezone": IANA name, "unix": seconds}. The optional argument
// "timezone" is an IANA name such as "Europe/Paris"; the default is UTC.
func GetTime(now func() time.Time) (*toolbox.Tool, error) {
	return builtin("get_time", "Current date and time in ISO 8601 with offset; optional IANA timezone.",
		`{"type":"object","properties":{"timezone":{"type":"string","description":"IANA time zone name such as Europe/Paris; default UTC"}},"additionalProperties":false}`,
		true,
		func(_ context.Context, call toolbox.Call) ([]byte, error) {
			zone := "UTC"
			if v := gjson.GetBytes(call.Arguments, "timezone"); v.Exists() {
				zone = v.Str
			}
			loc, err := time.LoadLocation(zone)
			if err != nil || zone == "" || zone == "Local" {
				return nil, protocol.Errorf(protocol.InvalidArgs, "get_time: unknown timezone %q (use an IANA name such as \"Europe/Paris\")", zone)
			}
			t := now().In(loc)
			out := make([]byte, 0, 96)
			out = append(out, `{"time":`...)
			out = protocol.AppendString(out, t.Format(isoMillis))
			out = append(out, `,"timezone":`...)
			out = protocol.AppendString(out, zone)
			out = append(out, `,"unix":`...)
			out = strconv.AppendInt(out, t.Unix(), 10)
			return append(out, '}'), nil
		})
}
