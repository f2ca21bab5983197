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

// Builtins returns every built-in tool. now is the clock of get_time
// (time.Now when nil).
func Builtins(now func() time.Time) []*toolbox.Tool {
	return []*toolbox.Tool{Echo(), GetTime(now)}
}

// Echo returns its arguments as its result. It is the default evaluator
// out of the box, and the cheapest path through the pipeline.
func Echo() *toolbox.Tool {
	return &toolbox.Tool{
		Descriptor: toolbox.Descriptor{
			Name:        "echo",
			Description: "Returns its arguments unchanged.",
		},
		Builtin: true,
		Run: func(_ context.Context, call toolbox.Call) ([]byte, error) {
			return call.Arguments, nil
		},
	}
}

// isoMillis is ISO 8601 with milliseconds and a numeric offset (+00:00
// rather than Z, so every answer has the same shape).
const isoMillis = "2006-01-02T15:04:05.000-07:00"

// GetTime answers the current time: {"time": ISO 8601 with offset,
// "timezone": IANA name, "unix": seconds}. The optional argument
// "timezone" is an IANA name such as "Europe/Paris"; the default is UTC.
func GetTime(now func() time.Time) *toolbox.Tool {
	if now == nil {
		now = time.Now
	}
	return &toolbox.Tool{
		Descriptor: toolbox.Descriptor{
			Name:        "get_time",
			Description: "Current date and time in ISO 8601 with offset; optional IANA timezone.",
		},
		Builtin: true,
		Run: func(_ context.Context, call toolbox.Call) ([]byte, error) {
			zone := "UTC"
			var bad *protocol.Error
			gjson.ParseBytes(call.Arguments).ForEach(func(k, v gjson.Result) bool {
				if k.Str != "timezone" {
					bad = protocol.Errorf(protocol.InvalidArgs, "get_time: unknown argument %q (known: timezone)", k.Str)
					return false
				}
				if v.Type != gjson.String {
					bad = protocol.Errorf(protocol.InvalidArgs, "get_time: \"timezone\" must be a string")
					return false
				}
				zone = v.Str
				return true
			})
			if bad != nil {
				return nil, bad
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
		},
	}
}
