package rules

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/clara-lib/clara/core/logging"
)

// TestFire_roomFromLastEmission: an emission makes room for as many rules
// as the event's last one fired; what fires is the same whatever the last
// emission did (more, fewer, none, with trace or without).
func TestFire_roomFromLastEmission(t *testing.T) {
	var texts []string
	for i := 0; i < 12; i++ {
		texts = append(texts, rule(fmt.Sprintf("r%02d", i), "on_x", "", fmt.Sprintf("context.n > %d", i),
			notify(fmt.Sprintf("r%02d {{ context.n }}", i)), "type = \"log\"\nmessage = \"l\""))
	}
	set := mustLoad(t, nil, texts...)
	h := &recHost{}
	for _, n := range []int{12, 0, 3, 12, 1, 12, 5, 5, 0, 1} {
		for _, trace := range []bool{false, true} {
			out := fire(set, h, "on_x", map[string]any{"n": float64(n)}, trace)
			var want []string
			for i := 0; i < n; i++ {
				want = append(want, fmt.Sprintf(`{"rule":"r%02d","actions":[{"message":"r%02d %d","priority":"normal","type":"notify_self"},{"level":"info","message":"l","type":"log"}]}`, i, i, n))
			}
			var got []string
			for _, f := range out.Fired {
				b, err := json.Marshal(f)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, string(b))
			}
			if strings.Join(got, "\n") != strings.Join(want, "\n") || len(out.Notices) != n {
				t.Errorf("n=%d trace=%v: fired\n%s\nwant\n%s\nnotices %d", n, trace, strings.Join(got, "\n"), strings.Join(want, "\n"), len(out.Notices))
			}
			if trace && len(out.Trace) != 12 {
				t.Errorf("n=%d: %d trace entries", n, len(out.Trace))
			}
		}
	}
}

// panicHost's first CallTool fails, its second panics.
type panicHost struct {
	*recHost
	calls int
}

func (h *panicHost) CallTool(context.Context, string, string, []byte) ([]byte, error) {
	h.calls++
	if h.calls == 1 {
		return nil, errors.New("tool failed")
	}
	panic("tool exploded")
}

// TestFire_panicLeavesNoRecord: a rule whose action panics is skipped, and
// what its actions had recorded does not show in the records of the rules
// after it.
func TestFire_panicLeavesNoRecord(t *testing.T) {
	set := mustLoad(t, nil,
		rule("a", "on_x", "priority = 2", "", "type = \"call_tool\"\ntool = \"one\"", "type = \"call_tool\"\ntool = \"two\""),
		rule("b", "on_x", "priority = 1", "", notify("b")),
	)
	h := &panicHost{recHost: &recHost{set: set}}
	out := set.Fire(context.Background(), Event{Name: "on_x", Session: "s1", Context: MapSource(map[string]any{})}, h)
	b, err := json.Marshal(out.Fired)
	if err != nil {
		t.Fatal(err)
	}
	if want := `[{"rule":"b","actions":[{"message":"b","priority":"normal","type":"notify_self"}]}]`; string(b) != want {
		t.Errorf("fired %s\nwant  %s", b, want)
	}
	if !h.logged(logging.Error, `panic in rule "a": tool exploded`) {
		t.Error("the panic was not logged")
	}
}
