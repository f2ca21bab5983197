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

// echo returns its arguments as its result. It is the default evaluator
// out of the box, and the cheapest path through the pipeline.
func echo() toolbox.Builtin {
	return toolbox.Builtin{Name: "echo", Description: "Returns its arguments unchanged.", LLMVisible: true,
		KeepsNothing: true,
		Run: func(_ context.Context, call toolbox.Call) ([]byte, error) {
			return call.Arguments, nil
		}}
}

// isoMillis is ISO 8601 with milliseconds and a numeric offset (+00:00
// rather than Z, so every answer has the same shape).
const isoMillis = "2006-01-02T15:04:05.000-07:00"

// getTime answers the current time: {"time": ISO 8601 with offset,
// "timezone": IANA name, "unix": seconds}. The optional argument
// "timezone" is an IANA name such as "Europe/Paris"; the default is UTC.
func getTime(now func() time.Time) toolbox.Builtin {
	return toolbox.Builtin{Name: "get_time", Description: "Current date and time in ISO 8601 with offset; optional IANA timezone.",
		Schema:     `{"type":"object","properties":{"timezone":{"type":"string","description":"IANA time zone name such as Europe/Paris; default UTC"}},"additionalProperties":false}`,
		LLMVisible: true,
		Run: func(_ context.Context, call toolbox.Call) ([]byte, error) {
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
		}}
}
