package tools

import (
	"context"
	"encoding/json"
	"time"

	"github.com/clara-lib/clara/core/session"
	"github.com/clara-lib/clara/core/toolbox"
)

// Deps are what the built-in tools reach.
type Deps struct {
	Now       func() time.Time  // the clock of get_time; time.Now when nil
	Registry  *toolbox.Registry // tools_list
	Audit     *toolbox.Audit    // audit_tail
	KV        *KV               // kv_*
	Sessions  *session.Table    // session_policy, notifications_drain
	Engine    Engine            // emit_event, session_end, state_*, rules_*
	Callbacks Callbacks         // callback_*
	Async     Async             // async_result, async_cancel
	Models    Models            // chat, evaluate, chat_reset
	Input     Input             // ask_user
	Docs      Docs              // doc_search
	Approvals Approvals         // approvals_list, approval_decide
}

// Docs is what doc_search reaches: the index of the project's documents.
type Docs interface {
	// Search answers doc_search's arguments {query, limit} with
	// {"results": [{path, line, snippet}]}.
	Search(ctx context.Context, session string, args []byte) ([]byte, error)
}

// Input is what ask_user reaches: the person behind the call (the MCP
// client that made it, or the host's input handler).
type Input interface {
	// Ask asks the user prompt for a call of session, a form when schema
	// is not nil, and returns {"answer": TEXT or OBJECT},
	// {"declined":true} or {"declined":true,"cancelled":true}; it returns
	// early, with ctx's error, when ctx ends.
	Ask(ctx context.Context, session, prompt string, schema json.RawMessage) ([]byte, error)
}

// Models is what the model tools reach (issue 11): the chat loop, the
// evaluator, the conversations of sessions.
type Models interface {
	Chat(ctx context.Context, call toolbox.Call) ([]byte, error)
	Evaluate(ctx context.Context, call toolbox.Call) ([]byte, error)
	ForgetConversation(session string)
	// History returns the conversation of session (chat_history), for a
	// call of caller's session.
	History(ctx context.Context, caller, session string) ([]byte, error)
}

// Async is what async_result and async_cancel reach: the table of
// asynchronous calls (*async.Table).
type Async interface {
	// Wait waits at most timeout, or until ctx ends, for the call's answer;
	// done is false while it runs. err: the handle is unknown or spent.
	Wait(ctx context.Context, handle int64, timeout time.Duration) (envelope []byte, done bool, err error)
	// Cancel cancels the call.
	Cancel(handle int64) error
}

// Engine is what the event, session, state and rule tools reach of the
// engine. Its methods are safe for concurrent use; ctx is the calling
// tool's.
type Engine interface {
	// Emit fires an event in session and returns the result object of an
	// emission (SPEC §7.3).
	Emit(ctx context.Context, session, event string, payload map[string]any, trace bool) ([]byte, error)
	// EndSession emits on_session_end in session, then frees what the
	// session holds in memory (not its policy); it returns the emission's
	// result object.
	EndSession(ctx context.Context, session string) ([]byte, error)
	// Nested reports whether ctx is a call made inside another (by a
	// rule, a script, a tool or a model), not one of the host's requests.
	Nested(ctx context.Context) bool
	// StateGet reads a value of the session's rule state (raw JSON), of
	// the rules of plugin when not "".
	StateGet(session, plugin, key string) (value []byte, found bool, err error)
	// StateSet stores a raw JSON value in the session's rule state, of the
	// rules of plugin when not "".
	StateSet(session, plugin, key string, value []byte) error
	// LoadRules adds or reloads rules and returns the rule listing.
	LoadRules(ctx context.Context, r RulesLoad) ([]byte, error)
	// ListRules lists the rules in force, of one trigger when not "".
	ListRules(trigger string) ([]byte, error)
	// TestRules runs a rule test file (a path or inline TOML).
	TestRules(ctx context.Context, path string, toml *string) ([]byte, error)
	// ListPlugins lists the plugins found, enabled or not.
	ListPlugins() ([]byte, error)
	// EnablePlugin enables or disables a plugin and returns the listing.
	EnablePlugin(ctx context.Context, name string, enabled bool) ([]byte, error)
}

// RulesLoad are rules_load's arguments.
type RulesLoad struct {
	TOML  *string  `json:"toml"`
	Name  string   `json:"name"`
	Paths []string `json:"paths"`
}

// Callbacks is what the callback tools reach (SPEC §9.2). args are the
// tool's arguments, already checked against its schema. Methods are safe
// for concurrent use; an error is the call's error.
type Callbacks interface {
	Upsert(ctx context.Context, session string, args []byte) ([]byte, error)
	Toggle(session string, args []byte) ([]byte, error)
	List(session string, args []byte) ([]byte, error)
	Get(session string, args []byte) ([]byte, error)
	Trigger(ctx context.Context, session string, args []byte) ([]byte, error)
}

// All returns every built-in tool.
func All(d Deps) []toolbox.Builtin {
	if d.Now == nil {
		d.Now = time.Now
	}
	list := []toolbox.Builtin{
		echo(), getTime(d.Now), mathEval(),
		kvSet(d.KV), kvGet(d.KV), kvDelete(d.KV), kvList(d.KV),
		toolsList(d.Registry), toolLimits(d.Registry), auditTail(d.Audit), auditReopen(d.Audit),
		sessionPolicy(d.Sessions), notificationsDrain(d.Sessions),
	}
	if d.Engine != nil {
		list = append(list, emitEvent(d.Engine), sessionEnd(d.Engine), stateGet(d.Engine), stateSet(d.Engine),
			rulesLoad(d.Engine), rulesList(d.Engine), rulesTest(d.Engine),
			pluginsList(d.Engine), pluginEnable(d.Engine))
	}
	if d.Models != nil {
		list = append(list, chat(d.Models), evaluate(d.Models), chatReset(d.Models), chatHistory(d.Models))
	}
	if d.Input != nil {
		list = append(list, askUser(d.Input))
	}
	if d.Async != nil {
		list = append(list, asyncResult(d.Async), asyncCancel(d.Async))
	}
	if d.Approvals != nil {
		list = append(list, approvalsList(d.Approvals), approvalDecide(d.Approvals))
	}
	if d.Callbacks != nil {
		list = append(list, callbackTools(d.Callbacks)...)
	}
	if d.Docs != nil {
		list = append(list, docSearch(d.Docs))
	}
	return list
}
