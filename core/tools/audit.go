package tools

import (
	"context"
	"fmt"

	"github.com/tidwall/gjson"

	"github.com/clara-lib/clara/core/toolbox"
)

// auditReopen closes and opens again the file of audit.path: after a log
// rotation renamed it, records go to a new file at that path.
func auditReopen(a *toolbox.Audit) toolbox.Builtin {
	return toolbox.Builtin{Name: "audit_reopen", Admin: true,
		Description: "Close and open again the audit file of audit.path, after a log rotation moved it (clara_audit_reopen); answers {\"reopened\": true}.",
		Schema:      `{"type":"object","additionalProperties":false}`,
		Run: func(context.Context, toolbox.Call) ([]byte, error) {
			if err := a.Reopen(); err != nil {
				return nil, err
			}
			return []byte(`{"reopened":true}`), nil
		}}
}

func auditTail(a *toolbox.Audit) toolbox.Builtin {
	return toolbox.Builtin{Name: "audit_tail",
		Description: fmt.Sprintf("The last N audit records (default 20, at most %d): time, session, tool, SHA-256 of the arguments, duration, status.", toolbox.AuditRingSize),
		Schema:      fmt.Sprintf(`{"type":"object","properties":{"n":{"type":"integer","minimum":1,"maximum":%d}},"additionalProperties":false}`, toolbox.AuditRingSize),
		// Room for the whole ring: a record is at most about 200 bytes plus
		// its session name.
		MaxOutputBytes: 4 << 20,
		Run: func(_ context.Context, call toolbox.Call) ([]byte, error) {
			n := 20
			if v := gjson.GetBytes(call.Arguments, "n"); v.Exists() {
				n = int(v.Int())
			}
			out := []byte(`{"records":[`)
			for i, r := range a.Tail(n) {
				if i > 0 {
					out = append(out, ',')
				}
				out = r.AppendJSON(out)
			}
			return append(out, "]}"...), nil
		}}
}
