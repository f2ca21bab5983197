package tools

import (
	"context"

	"github.com/clara-lib/clara/core/toolbox"
)

// The callback tools (SPEC §9.2). The callbacks Manager checks its
// arguments itself too, with messages that say what to fix; the schemas
// are what callers see. They are administrative: a rule, a script or a
// model cannot create or fire callbacks unless the configuration says so
// (policy.admin_in_nested_calls; callback_tools.models for all but
// callback_trigger).
func callbackTools(c Callbacks) []toolbox.Builtin {
	plain := func(f func(session string, args []byte) ([]byte, error)) toolbox.Func {
		return func(_ context.Context, call toolbox.Call) ([]byte, error) { return f(call.Session, call.Arguments) }
	}
	return []toolbox.Builtin{
		{Name: "callback_upsert", Admin: true, MaxOutputBytes: 16 << 20,
			Run: func(ctx context.Context, call toolbox.Call) ([]byte, error) {
				return c.Upsert(ctx, call.Session, call.Arguments)
			},
			Description: "Creates, updates or deletes a file-change callback: a bash script run when files matching " +
				"gitignore-style patterns change. Update replaces the fields given, the whole script (script_content) or one " +
				"exact piece of it (old_string -> new_string). A new callback is active for the calling session.",
			Schema: `{"type":"object","properties":{` +
				`"action":{"enum":["create","update","delete"]},` +
				`"id":{"type":"string","minLength":1,"maxLength":64},` +
				`"name":{"type":"string","pattern":"^[a-z0-9][a-z0-9_-]{0,63}$"},` +
				`"description":{"type":"string","maxLength":4096},` +
				`"pattern":{"oneOf":[{"type":"string","minLength":1,"maxLength":4096},{"type":"array","items":{"type":"string","minLength":1,"maxLength":4096},"minItems":1,"maxItems":256}]},` +
				`"blocking":{"type":"boolean"},` +
				`"timeout_secs":{"type":"integer","minimum":1,"maximum":3600},` +
				// The seed's own name for timeout_secs (seed 001).
				`"timeout":{"type":"integer","minimum":1,"maximum":3600},` +
				`"success_message":{"type":"string","maxLength":1024},` +
				`"cwd":{"type":"string","maxLength":4096},` +
				`"one_at_a_time":{"type":"boolean"},` +
				`"once_per_batch":{"type":"boolean"},` +
				`"on_busy":{"enum":["queue","skip"]},` +
				`"pass_files":{"enum":["env","args","stdin"]},` +
				`"script_content":{"type":"string","maxLength":1048576},` +
				`"old_string":{"type":"string","minLength":1},` +
				`"new_string":{"type":"string"}},` +
				`"required":["action"],` +
				`"allOf":[{"if":{"properties":{"action":{"const":"create"}}},"then":{"required":["name","pattern","script_content"]}}],` +
				`"additionalProperties":false}`},
		{Name: "callback_toggle", Admin: true, MaxOutputBytes: 16 << 20, Run: plain(c.Toggle),
			Description: "Turns a callback on or off for the calling session.",
			Schema: `{"type":"object","properties":{"id":{"type":"string","minLength":1,"maxLength":64},"active":{"type":"boolean"}},` +
				`"required":["id","active"],"additionalProperties":false}`},
		{Name: "callback_list", Admin: true, MaxOutputBytes: 16 << 20, Run: plain(c.List),
			Description: "Lists the callbacks, with whether each is active for the calling session.",
			Schema:      `{"type":"object","additionalProperties":false}`},
		{Name: "callback_get", Admin: true, MaxOutputBytes: 16 << 20, Run: plain(c.Get),
			Description: "Returns one callback (by id or name) with its script.",
			Schema: `{"type":"object","properties":{"id":{"type":"string","minLength":1,"maxLength":64}},` +
				`"required":["id"],"additionalProperties":false}`},
		// callback_trigger declares exec; the engine applies test mode to each
		// run itself, so that dry runs still answer.
		{Name: "callback_trigger", Admin: true, MaxOutputBytes: 16 << 20, Capabilities: []string{toolbox.CapExec},
			Description: "Fires the calling session's callbacks that match changed_files; dry_run only says which would fire.",
			// At most 10,000 files a trigger: each may be a run of its own,
			// and the answer lists every run.
			Schema: `{"type":"object","properties":{"changed_files":{"type":"array","maxItems":10000,"items":{"type":"string","minLength":1,"maxLength":4096}},` +
				`"dry_run":{"type":"boolean"}},"required":["changed_files"],"additionalProperties":false}`,
			Run: func(ctx context.Context, call toolbox.Call) ([]byte, error) {
				return c.Trigger(ctx, call.Session, call.Arguments)
			}},
	}
}
