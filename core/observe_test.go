package core_test

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestAudit_nested_calls_of_requests_with_and_without_an_id: a rule's
// call_tool made while serving a request names that request's id, and
// none when the request had none, even when the request's pooled state
// served a request with an id before: every record stays valid JSON.
func TestAudit_nested_calls_of_requests_with_and_without_an_id(t *testing.T) {
	e := rulesEngine(t, `{"audit":{"decision_ids":true}}`)
	mustConfigure(t, e, `{"rules":{"builtin":false}}`)
	out := evalString(t, e, `{"tool":"rules_load","arguments":{"name":"n.toml","toml":"[[rules]]\nid = \"again\"\ntrigger = \"on_tool_complete\"\n[rules.condition]\nexpression = \"context.tool.name == 'echo' and context.tool.arguments.nest == true\"\n[[rules.actions]]\ntype = \"call_tool\"\ntool = \"get_time\"\narguments = {}\n"}}`)
	if !strings.HasPrefix(out, `{"status":"success"`) {
		t.Fatal(out)
	}
	// The echo keeps nothing: its request's state goes back to the pool
	// after a plain call (here, of an engine no rule watches: the pool is
	// the process's), and the next request takes it, buffers and all.
	plain := rulesEngine(t, `{"rules":{"builtin":false}}`)
	for _, req := range []string{`{"tool":"echo","id":"first","arguments":{}}`, `{"tool":"echo","id":"with-id","arguments":{"nest":true}}`,
		`{"tool":"echo","id":"again","arguments":{}}`, `{"tool":"echo","arguments":{"nest":true}}`} {
		evalString(t, plain, `{"tool":"echo","id":"pooled-with-an-id","arguments":{}}`)
		evalString(t, e, req)
	}
	tail := evalString(t, e, `{"tool":"audit_tail","arguments":{"n":6}}`)
	var got struct {
		Result struct{ Records []map[string]any }
	}
	if err := json.Unmarshal([]byte(tail), &got); err != nil {
		t.Fatalf("%v: %s", err, tail)
	}
	var nested []map[string]any
	for _, r := range got.Result.Records {
		if r["parent_id"] != nil {
			nested = append(nested, r)
		}
	}
	// The test's clock stands still: records of the ring's shards tie on
	// their time, so audit_tail may list the two in either order.
	withID, without := 0, 0
	for _, r := range nested {
		switch r["id"] {
		case "with-id":
			withID++
		case nil:
			without++
		}
	}
	if len(nested) != 2 || withID != 1 || without != 1 {
		t.Fatalf("nested records %v", nested)
	}
}
