package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"

	"github.com/tidwall/gjson"

	"github.com/clara-lib/clara/core/protocol"
	"github.com/clara-lib/clara/core/toolbox"
)

// toolLimits changes a host tool's limits after its registration (seed
// 002's AI.TOOL.LIMITS): the limits given replace the tool's, the others
// stay; calls already running keep the limits they started with. It is
// administrative: a model or a rule may not lift its own bounds. Only the
// host's tools (C, Python): a built-in tool's limits are Clara's, a
// configured one's are set where the configuration declares it.
func toolLimits(reg *toolbox.Registry) toolbox.Builtin {
	return toolbox.Builtin{Name: "tool_limits", Admin: true,
		Description: "Changes the limits of a tool the host registered (timeout_ms, rate_per_min, rate_scope, max_output_bytes, " +
			"max_concurrency) for the calls that start from now on; the limits not given stay. Result: {name, limits, previous}.",
		Schema: `{"type":"object","properties":{"name":{"type":"string","minLength":1,"maxLength":64},` +
			`"limits":{"type":"object","properties":{"timeout_ms":{"type":"integer"},"rate_per_min":{"type":"integer"},` +
			`"rate_scope":{"enum":["tool","session"]},"max_output_bytes":{"type":"integer"},"max_concurrency":{"type":"integer"}},` +
			`"additionalProperties":false}},"required":["name","limits"],"additionalProperties":false}`,
		Run: func(_ context.Context, call toolbox.Call) ([]byte, error) {
			name := gjson.GetBytes(call.Arguments, "name").Str
			patch := []byte(gjson.GetBytes(call.Arguments, "limits").Raw)
			prev, next, err := reg.SetLimits(name, func(t *toolbox.Tool) (toolbox.Limits, error) {
				if !t.Host {
					return toolbox.Limits{}, protocol.Errorf(protocol.Denied, "tool_limits: tool %q is not one the host registered: %s", name, whose(t))
				}
				return toolbox.PatchLimits(t.Limits, patch)
			})
			if err != nil {
				var pe *protocol.Error
				switch {
				case errors.As(err, &pe):
					return nil, pe
				case errors.Is(err, toolbox.ErrNotFound):
					return nil, protocol.Errorf(protocol.UnknownTool, "tool_limits: no tool named %q", name)
				}
				return nil, protocol.Errorf(protocol.InvalidArgs, "tool_limits: %v", err)
			}
			out := append(protocol.AppendString([]byte(`{"name":`), name), `,"limits":`...)
			out = appendLimits(out, next.Limits)
			out = appendLimits(append(out, `,"previous":`...), prev.Limits)
			return append(out, '}'), nil
		}}
}

func whose(t *toolbox.Tool) string {
	if t.Builtin {
		return "its limits are Clara's"
	}
	return "its limits are set where " + t.Origin.Name + " declares it"
}

func appendLimits(b []byte, l toolbox.Limits) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	_ = enc.Encode(struct {
		TimeoutMS      int    `json:"timeout_ms"`
		RatePerMin     int    `json:"rate_per_min"`
		RateScope      string `json:"rate_scope"`
		MaxOutputBytes int    `json:"max_output_bytes"`
		MaxConcurrency int    `json:"max_concurrency"`
	}{l.TimeoutMS, l.RatePerMin, l.RateScope, l.MaxOutputBytes, l.MaxConcurrency})
	return append(b, bytes.TrimSpace(buf.Bytes())...)
}
