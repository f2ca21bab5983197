/* SPDX-License-Identifier: MIT */
/*
 * clara.h - the public C interface of Clara, an embeddable tools-and-rules
 * library for rule-based programs.
 *
 * A caller hands Clara one JSON request; Clara routes it to a tool, runs it
 * under the configured limits and returns one JSON response envelope. The
 * protocol is described in docs/protocol.md; this header is the reference
 * for the C functions.
 *
 * Conventions used on every declaration below:
 *   Ownership  - strings passed in are borrowed for the duration of the call
 *                only; every char * Clara returns was allocated with malloc
 *                and belongs to the caller, who frees it with
 *                clara_free_string().
 *   Threads    - every function may be called from any thread, concurrently,
 *                unless its comment says otherwise. Clara takes no global
 *                lock on the call path.
 *   Errors     - functions returning char * report failures inside the JSON
 *                envelope ({"status":"error",...}); functions returning int
 *                report failures as a negative -CLARA_E* code, which
 *                clara_strerror() describes (success is CLARA_OK, or a
 *                non-negative value where the function says so).
 *
 * Limits of the platform (Clara is written in Go): the library cannot be
 * unloaded (dlclose does nothing); a process can hold only one Go-built
 * shared library; a child created with fork() must not call Clara (exec
 * first; in Python use the "spawn" start method); glibc only.
 *
 * Environment read when the library is loaded:
 *   CLARA_CONFIG  path of a configuration file (TOML or JSON) applied on top
 *                 of the embedded defaults.
 *   CLARA_LOG     debug, info, warn, error or off: the level of messages
 *                 written to stderr while no log handler is set. Unset, only
 *                 errors are written.
 */
#ifndef CLARA_H
#define CLARA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Version ------------------------------------------------------------ */

#define CLARA_VERSION_MAJOR 0
#define CLARA_VERSION_MINOR 2
#define CLARA_VERSION_PATCH 0
#define CLARA_VERSION "0.2.0"
/* major*1000000 + minor*1000 + patch */
#define CLARA_VERSION_NUMBER 2000

/*
 * clara_version - the library's version as "MAJOR.MINOR.PATCH".
 *
 * Ownership: a static string; never free it.
 * Returns:   the version of the library actually loaded. A program can check
 *            at start-up that it matches the header it was built with:
 *            clara_version_number() == CLARA_VERSION_NUMBER.
 */
const char *clara_version(void);

/*
 * clara_version_number - the library's version as one integer,
 * major*1000000 + minor*1000 + patch (CLARA_VERSION_NUMBER of the library).
 */
int clara_version_number(void);

/* ---- Calls -------------------------------------------------------------- */

/*
 * clara_evaluate - serve one request; the one door into Clara.
 *
 * request_json is a JSON object in UTF-8, in one of two forms:
 *   simple:   {"question": "..."}        no "tool" key: the whole object is
 *             given to the default evaluator (configuration key
 *             default_evaluator, "echo" out of the box);
 *   explicit: {"tool": "NAME", "arguments": {...}} with optional "session"
 *             (string) and "id" (string or number, echoed back).
 *
 * Ownership: request_json is borrowed for the call. The returned string is
 *            malloc'd; free it with clara_free_string().
 * Threads:   any thread, concurrently.
 * Returns:   a compact JSON envelope, "status" first:
 *              {"status":"success","tool":"echo","result":{...}}
 *              {"status":"error","error":"unknown_tool","message":"..."}
 *            Bad input (NULL, empty, invalid UTF-8, not an object, too large,
 *            too deep) yields an error envelope, never a crash. NULL is
 *            returned only when malloc itself fails.
 */
char *clara_evaluate(const char *request_json);

/*
 * clara_free_string - free a string returned by any clara_* function.
 *
 * Passing NULL is allowed and does nothing. Do not pass anything else: only
 * strings Clara returned, each once.
 */
void clara_free_string(char *s);

/* ---- Configuration ------------------------------------------------------ */

/*
 * clara_configure - apply configuration text (TOML, or JSON when the text
 * starts with '{') on top of the configuration in force.
 *
 * A key given replaces that key; a table given merges key by key; unknown
 * keys and ill-typed values are errors. The change applies entirely or, on
 * any error, not at all. Calls already running finish with the
 * configuration they started with.
 *
 * Ownership: config is borrowed; the returned envelope is malloc'd (free it
 *            with clara_free_string()).
 * Threads:   any thread; concurrent calls are applied one after another.
 * Returns:   {"status":"success","result":{"config":{...}}} with the whole
 *            configuration now in force, or an invalid_request envelope whose
 *            "details" lists every problem found. NULL only if malloc fails.
 */
char *clara_configure(const char *config);

/*
 * clara_reset - return to the embedded default configuration plus the file
 * named by CLARA_CONFIG at load time, drop every tool registered through
 * this API (their free_userdata runs once their running calls return) and
 * every session policy. Meant for tests.
 *
 * Ownership: the returned envelope is malloc'd (clara_free_string()).
 * Returns:   {"status":"success","result":{"config":{...}}}.
 */
char *clara_reset(void);

/* ---- Events and rules --------------------------------------------------- */

/*
 * clara_emit - fire an event at the rules (docs/rules.md).
 *
 * event_json is {"event": "name", "session": "s", "payload": {...},
 * "trace": false}; only "event" is required ([a-z][a-z0-9_.]*, and not one
 * of the on_tool_* events, which the tool pipeline emits itself). Every
 * rule whose trigger is the event and whose condition holds acts, in
 * priority order; notify_self messages are returned here and also queued
 * for the session (the tool notifications_drain reads the queue).
 *
 * Ownership: event_json is borrowed; the returned envelope is malloc'd
 *            (clara_free_string()).
 * Threads:   any thread, concurrently with every other call.
 * Returns:   {"status":"success","result":{"fired":[{"rule","actions"}],
 *            "notices":[{"rule","message","priority","event"}],
 *            "denied":null}} (plus "trace" when asked), or an error envelope
 *            (invalid_json, invalid_request). NULL only if malloc fails.
 */
char *clara_emit(const char *event_json);

/*
 * clara_rule_condition_fn - the condition of a rule the host registers
 * (clara_register_rule): whether the rule matches an event.
 *
 * event_json is one JSON object, NUL-terminated, borrowed for the duration
 * of the call: {"rule":"id","event":"on_tool_call","session":"s",
 * "context":{...}}, context being what the rule's expressions would see
 * as context (docs/rules.md): the payload's fields, event, tool (with its
 * arguments, on the on_tool_* events), history and state.
 * Returns:   a positive value: the rule matches; 0: it does not; a
 *            negative value: it cannot tell, a condition that fails (on
 *            on_tool_call the call is then denied; elsewhere the rule does
 *            not act).
 * Threads:   called on the thread that fires the event (the caller of
 *            clara_evaluate for on_tool_call, of clara_emit for the events
 *            it fires, a chat's thread for on_turn_start), possibly on
 *            several threads at once. Clara cannot interrupt it: the event
 *            waits for it, so it should return promptly. It may call
 *            clara_* functions (a request made there is one of its own,
 *            not part of the event). It must return normally: no longjmp
 *            and no C++ exception may cross Clara's frames.
 */
typedef int (*clara_rule_condition_fn)(void *userdata, const char *event_json);

/*
 * clara_rule_action_fn - the action of a rule the host registers, called
 * when the rule matched. It may do anything of its own, and returns what
 * Clara is to do besides.
 *
 * event_json is as for clara_rule_condition_fn.
 * Returns:   NULL: nothing more; or NUL-terminated JSON allocated with
 *            malloc() (strdup() will do), which Clara frees with free():
 *            one action or an array of actions, written as in a rule file
 *            (docs/rules.md; no {{ templates }}: the text is the host's):
 *              {"type":"notify_self","message":"...","priority":"high"}
 *                  (and "deliver_on", "deliver_after_ms"),
 *              {"type":"log","level":"info","message":"..."},
 *              {"type":"set_state","key":"k","value":...},
 *              {"type":"emit_event","event":"name","payload":{...}},
 *              {"type":"deny","reason":"..."}, {"type":"ask","reason":"..."},
 *              {"type":"block","reason":"..."} (where a rule file may);
 *            or {"error":"..."}: the action failed. A failure, or an answer
 *            that is not such actions, skips the rule's actions as an
 *            action that cannot be prepared does: on on_tool_call the call
 *            is denied; on on_chat_start, on_tool_complete and on_answer
 *            what the rule guards is refused.
 * Threads:   as clara_rule_condition_fn.
 */
typedef char *(*clara_rule_action_fn)(void *userdata, const char *event_json);

/*
 * clara_register_rule - add a rule whose condition and action are the
 * host's own functions (seed 004's Tier 1), beside the rules of files: the
 * same hook points, priorities, stop, mode, trace, rules_list and rule
 * tests (docs/rules.md, "Rules of the host").
 *
 * descriptor_json is the rule as a JSON rule file writes one (or JSON5):
 *   {"id": "big-payments", "trigger": "on_tool_call", "priority": 10,
 *    "stop": false, "mode": "enforce", "description": "..."}
 * id and trigger are required. When condition is NULL it may give a
 * "condition" (an expression, as in a rule file; none: the rule matches
 * every event of its trigger); it may give "actions" (or "action"), which
 * run before the action function, and must when action is NULL. A rule
 * registered earlier through this function with the same id is replaced.
 * The rule stays through clara_configure (clear = ["rules"] included)
 * until clara_unregister_rule() or clara_reset().
 *
 * Ownership: descriptor_json is borrowed. userdata is passed to both
 *            functions. free_userdata (may be NULL) is called once with
 *            userdata when the rule is unregistered, replaced or dropped by
 *            clara_reset(), after the last running call of its functions
 *            has returned, and also when registration fails. It runs on the
 *            thread that let go of the rule last, never while Clara holds a
 *            lock of its own.
 * Threads:   any thread.
 * Returns:   CLARA_OK;
 *            -CLARA_EINVAL  descriptor_json is NULL, or the descriptor is
 *                           invalid, gives no action, or gives a condition
 *                           beside a condition function (the reason is
 *                           logged at error level);
 *            -CLARA_EPERM   a rule of the configuration (a rule file, a
 *                           plugin, rules_load, the built-in rules) has
 *                           that id.
 */
int clara_register_rule(const char *descriptor_json, clara_rule_condition_fn condition, clara_rule_action_fn action,
                        void *userdata, void (*free_userdata)(void *));

/*
 * clara_unregister_rule - remove a rule added with clara_register_rule().
 *
 * Emissions already running may still call its functions; free_userdata
 * runs once they have returned.
 * Returns: CLARA_OK; -CLARA_EINVAL (id is NULL); -CLARA_ENOENT (no rule
 *          the host registered has that id); -CLARA_EPERM (a rule of the
 *          configuration).
 */
int clara_unregister_rule(const char *id);

/* ---- Tools written in C ------------------------------------------------- */

/* One running call of a C tool; opaque, valid only until the tool returns. */
typedef struct clara_call clara_call;

/*
 * clara_tool_fn - a tool written in C (or in Python through ctypes).
 *
 * arguments_json is the call's arguments, a JSON object already validated
 * against the tool's input_schema, NUL-terminated, borrowed until the
 * function returns. Report the outcome through call, then return:
 *   0        success; the result is what clara_call_result() set, or null;
 *   non-zero failure; the envelope is tool_failed with the message given to
 *            clara_call_error(), or "tool failed (code N)".
 * Calling clara_call_error() makes the call a failure whatever is returned.
 *
 * Threads: called on a thread of Clara's (on the caller's own thread when
 *          the descriptor sets "on_caller_thread"), possibly several calls
 *          at once (unless the descriptor sets "max_concurrency": 1). It may
 *          call the functions of this header; to call tools in its own
 *          call's scope (policy, session, depth), use clara_call_evaluate().
 * Timeouts: when the call runs past its timeout_ms, the caller gets timeout
 *          at the deadline; the function keeps running until it returns, and
 *          what it reports then is discarded. Clara cannot stop C code.
 *          Such an overdue call holds its thread until the function
 *          returns: while limits.max_overdue_calls of them (default 64) run
 *          on, every new call of a C or Python tool (but one that runs
 *          "on_caller_thread") is refused with tool_failed ("... was not
 *          started ..."), until one returns. So a tool that may block for
 *          ever should watch a time limit of its own.
 */
typedef int (*clara_tool_fn)(void *userdata, const char *arguments_json, clara_call *call);

/*
 * clara_register_tool - add a tool written in C.
 *
 * descriptor_json describes the tool (docs/tools.md):
 *   {"name": "get_weather", "description": "...",
 *    "input_schema": {JSON Schema, draft 2020-12 unless $schema says otherwise},
 *    "returns": "json" | "string", "capabilities": ["network", ...],
 *    "limits": {"timeout_ms": 1000, "rate_per_min": 20, "rate_scope": "tool",
 *               "max_output_bytes": 65536, "max_concurrency": 4},
 *    "llm_visible": true, "on_caller_thread": false}
 * Only "name" is required. "on_caller_thread": true runs the tool on the
 * thread of the call that asked for it, with no handoff to a worker thread
 * (for tools that return quickly): its timeout then cannot cut the call
 * short; the caller waits for the function to return, and a call that went
 * past timeout_ms is answered timeout, its result dropped. The schema is compiled once, here. A tool of the
 * same name registered earlier through this function is replaced; calls
 * already running finish with the old one.
 *
 * Ownership: descriptor_json is borrowed. userdata is passed to fn on every
 *            call. free_userdata (may be NULL) is called once with userdata
 *            when the tool is unregistered, replaced or dropped by
 *            clara_reset(), after its last running call has returned, and
 *            also when registration fails, so the caller never has to guess
 *            who frees. free_userdata runs on the thread that let go of the
 *            tool last (the one calling clara_unregister_tool(),
 *            clara_configure(), clara_reset() or clara_register_tool(), or
 *            the worker thread of the tool's last running call), and never
 *            while Clara holds a lock of its own: it may call any clara_*
 *            function, clara_configure() and clara_reset() included.
 * Threads:   any thread; tools may be registered while others are called.
 * Returns:   CLARA_OK;
 *            -CLARA_EINVAL  descriptor_json or fn is NULL, or the descriptor
 *                           or its schema is invalid (the reason is logged
 *                           at error level);
 *            -CLARA_EPERM   the name belongs to a built-in tool.
 */
int clara_register_tool(const char *descriptor_json, clara_tool_fn fn, void *userdata,
                        void (*free_userdata)(void *));

/*
 * clara_unregister_tool - remove a tool added with clara_register_tool().
 *
 * Calls already running finish; then free_userdata runs (see above).
 * Returns: CLARA_OK; -CLARA_EINVAL (name is NULL); -CLARA_ENOENT (no such
 *          tool); -CLARA_EPERM (a built-in tool).
 */
int clara_unregister_tool(const char *name);

/*
 * clara_set_tool_limits - change the limits of a tool added with
 * clara_register_tool(), for the calls that start from now on.
 *
 * limits_json is an object of the limits to change, as in a descriptor
 * ("timeout_ms", "rate_per_min", "rate_scope", "max_output_bytes",
 * "max_concurrency"); the limits it leaves out stay as they are. It may be
 * written as JSON5 ({timeout_ms: 800, rate_per_min: 20}, docs/protocol.md).
 * Calls already running keep the limits they started with. The change is
 * a request of the administrative tool tool_limits: the configuration's
 * policy and the audit see it as any call. clara_register_tool() and
 * clara_reset() bring back the descriptor's limits.
 *
 * Ownership: name and limits_json are borrowed.
 * Threads:   any thread.
 * Returns:   CLARA_OK;
 *            -CLARA_EINVAL  name or limits_json is NULL, or the limits are
 *                           not an object of valid limits (the reason is
 *                           logged at error level);
 *            -CLARA_ENOENT  no such tool;
 *            -CLARA_EPERM   a tool the host did not register (built-in,
 *                           configured, remote), or a policy denies
 *                           tool_limits.
 */
int clara_set_tool_limits(const char *name, const char *limits_json);

/*
 * clara_call_result - set the result of a call, from inside the tool.
 *
 * For a "returns": "json" tool, result_json must be valid JSON (otherwise
 * the call is tool_failed); for a "string" tool it is taken verbatim as the
 * result string. NULL means null. A later call replaces an earlier one.
 *
 * Ownership: result_json is copied; free it when you like.
 * Threads:   the tool's own thread, before the tool returns. Calls with a
 *            clara_call whose tool has returned are ignored.
 */
void clara_call_result(clara_call *call, const char *result_json);

/*
 * clara_call_error - report the call as failed with a message for people.
 *
 * Ownership: message is copied. NULL gives the default message.
 * Threads:   as clara_call_result().
 */
void clara_call_error(clara_call *call, const char *message);

/*
 * clara_call_progress - report a running tool's progress.
 *
 * done units of total (total 0 when unknown), with an optional message
 * (may be NULL). When the call came from an MCP client that asked for
 * progress, it becomes a notifications/progress; otherwise nothing
 * happens. Values that do not increase are dropped.
 *
 * Ownership: message is borrowed for the duration of the call.
 * Threads:   from the tool, while it runs (any thread); calls after the
 *            tool returned are ignored.
 */
void clara_call_progress(clara_call *call, double done, double total, const char *message);

/*
 * clara_call_log - send a message of a running tool to the MCP client.
 *
 * level is CLARA_LOG_DEBUG, _INFO, _WARN or _ERROR (MCP's debug, info,
 * warning, error; other values are dropped with a warning on the log).
 * When the call came from an MCP client that set a log level at or below
 * level (logging/setLevel), it becomes a notifications/message whose
 * logger is the tool's name; otherwise nothing happens. Clara's own log
 * (clara_set_log_handler) never sees it.
 *
 * Ownership: message is borrowed for the duration of the call.
 * Threads:   as clara_call_progress().
 */
void clara_call_log(clara_call *call, int level, const char *message);

/*
 * clara_call_session - the session a running tool's call belongs to.
 *
 * Ownership: returns a malloc'd copy; free it with clara_free_string(). A
 *            name holding a NUL byte (\u0000 in JSON) comes cut at it.
 * Threads:   from the tool, while it runs (any thread).
 * Returns:   the session's name ("default" when the request named none);
 *            NULL when the call is not running (or malloc failed).
 */
char *clara_call_session(clara_call *call);

/*
 * clara_call_cancelled - whether a running tool should stop.
 *
 * Clara cannot stop a C or Python tool; a long one can poll this and give
 * up early. Its answer is dropped anyway.
 *
 * Threads:   from the tool, while it runs (any thread).
 * Returns:   1 when the call was cancelled (clara_cancel(), an MCP client's
 *            notifications/cancelled, the end of its session or server),
 *            ran past its timeout_ms, or is no longer running; 0 while it
 *            goes on.
 */
int clara_call_cancelled(clara_call *call);

/*
 * clara_call_evaluate - run a request from inside a tool, in the tool's scope.
 *
 * As clara_evaluate(), but the request runs inside the calling tool's call
 * instead of as a new request of the host: in the tool's session (naming
 * another session is invalid_request), under the policy the tool's call runs
 * under (the request's own "policy" can narrow it, never widen it), one
 * level deeper (calls nest at most 8 deep), as a nested call (the
 * administrative tools are out of reach unless policy.admin_in_nested_calls),
 * and never reaching a tool on the call stack: the calling tool, or a tool
 * that called it, is denied at once. {"tool": "chat", ...} runs a nested
 * chat whose model is never offered those tools. "async": true is refused.
 * A tool that calls clara_evaluate() instead escapes all of this.
 *
 * Ownership: request_json is borrowed for the call. Returns a malloc'd
 *            envelope; free it with clara_free_string(). NULL only if malloc
 *            fails.
 * Threads:   from the tool, while it runs (any thread). A call whose tool has
 *            returned, or a handle that is not a running call, gets an
 *            invalid_request envelope.
 */
char *clara_call_evaluate(clara_call *call, const char *request_json);

/* ---- Reading JSON ------------------------------------------------------- */

/* Kinds of value returned by clara_json_get(). */
#define CLARA_JSON_MISSING 0 /* nothing at that path; *text is set to NULL */
#define CLARA_JSON_NULL    1 /* text "null" */
#define CLARA_JSON_FALSE   2 /* text "false" */
#define CLARA_JSON_TRUE    3 /* text "true" */
#define CLARA_JSON_INTEGER 4 /* a number that fits a long long; text as written */
#define CLARA_JSON_FLOAT   5 /* any other number; text as written */
#define CLARA_JSON_STRING  6 /* text is the string, unescaped, in UTF-8 */
#define CLARA_JSON_ARRAY   7 /* text is the array as compact JSON */
#define CLARA_JSON_OBJECT  8 /* text is the object as compact JSON */

/*
 * clara_json_get - read the value at a path in a JSON document, such as an
 * envelope returned by clara_evaluate(), without a JSON library.
 *
 * path uses gjson syntax: "result.message", "details.0.path",
 * "result.items.#" (array length). See docs/c-api.md. gjson's @modifiers
 * are refused (they can transform a document without bound); a key that
 * contains '@' is written with a backslash: "user\\@host".
 *
 * Ownership: json and path are borrowed. On success *text receives a
 *            malloc'd, NUL-terminated string (NULL for CLARA_JSON_MISSING)
 *            that the caller frees with clara_free_string(). A string value
 *            may contain NUL characters (JSON "\u0000"): when length is not
 *            NULL, *length receives the full length in bytes.
 * Threads:   any thread.
 * Returns:   a CLARA_JSON_* kind (>= 0), or
 *            -CLARA_EINVAL    json or path or text is NULL, json is not
 *                             valid JSON, or path uses an @modifier (*text
 *                             is set to NULL when text is not NULL);
 *            -CLARA_ENOMEM    malloc failed;
 *            -CLARA_EINTERNAL a bug in Clara (logged).
 */
int clara_json_get(const char *json, const char *path, char **text, size_t *length);

/*
 * clara_json5_to_json - read JSON5, the relaxed JSON people write by hand
 * (unquoted keys, 'single quotes', trailing commas, comments, hexadecimal
 * numbers; docs/protocol.md), and write it as compact JSON.
 *
 * Object keys come out sorted; a key given twice keeps its last value;
 * NaN and Infinity, which JSON cannot hold, are refused; text is bounded
 * by limits.max_request_bytes and limits.max_depth.
 *
 * Ownership: text is borrowed. *json receives a malloc'd string that the
 *            caller frees with clara_free_string(): the JSON on success,
 *            a message saying what is wrong with text on -CLARA_EINVAL.
 * Threads:   any thread.
 * Returns:   CLARA_OK;
 *            -CLARA_EINVAL    text or json is NULL (*json then NULL when
 *                             json is not), or text is not one JSON5 value;
 *            -CLARA_ENOMEM    malloc failed.
 */
int clara_json5_to_json(const char *text, char **json);

/* ---- Logging ------------------------------------------------------------ */

#define CLARA_LOG_DEBUG 0
#define CLARA_LOG_INFO  1
#define CLARA_LOG_WARN  2
#define CLARA_LOG_ERROR 3
#define CLARA_LOG_OFF   4

/*
 * clara_log_fn - receives one log message.
 *
 * level is a CLARA_LOG_* value; message is NUL-terminated UTF-8, borrowed
 * for the duration of the call (copy it to keep it).
 * Threads: called from any thread, possibly concurrently: it must be
 *          thread-safe, and it must not call any clara_* function. It may
 *          run while another thread is inside clara_configure() or
 *          clara_set_log_handler(), so it must not wait for such a thread.
 *          It must return normally: no longjmp and no C++ exception may
 *          cross Clara's frames.
 */
typedef void (*clara_log_fn)(void *userdata, int level, const char *message);

/*
 * clara_set_log_handler - send Clara's messages at min_level and above to fn.
 *
 * Passing fn == NULL restores the default: stderr at the CLARA_LOG level.
 * Argument values and secrets are never logged.
 *
 * Ownership: userdata is passed back to fn untouched; Clara never frees it.
 * Threads:   any thread. When this function returns, the previous handler is
 *            not running and will not be called again, so its userdata may
 *            be freed. Do not call it from inside a handler.
 */
void clara_set_log_handler(clara_log_fn fn, void *userdata, int min_level);

/* ---- The audit and telemetry (docs/observability.md) --------------------- */

/*
 * clara_audit_reopen - close and open again the audit file of audit.path.
 *
 * After logrotate (or anyone) renamed the file, records go on into the
 * renamed one until this is called; then they go to a new file at
 * audit.path. The same as the audit_reopen tool. Call it from the host's
 * main loop when its SIGHUP handler has set a flag, never from the signal
 * handler itself. Standard output and a rotation by audit.max_size_mb need
 * no reopening (it does no harm).
 *
 * Threads:  any thread, concurrently with calls (none of their records is
 *           lost or cut).
 * Returns:  0, or -1 when the file cannot be opened again (the reason is
 *           logged; records keep going to the file they went to).
 */
int clara_audit_reopen(void);

/*
 * clara_telemetry_flush - export what telemetry holds in its batches
 * (spans, metrics, audit records as OTLP logs), waiting at most timeout_ms.
 *
 * Telemetry exports in the background; a process that exits at once would
 * lose the last batch. Call it before exit (the Python package does, at
 * interpreter exit). Without telemetry it returns 0 at once.
 *
 * Threads:  any thread.
 * Returns:  0, or -1 when the export failed or did not end in time.
 */
int clara_telemetry_flush(int timeout_ms);

/* ---- Events of chats ----------------------------------------------------- */

/*
 * clara_event_fn - receives one progress event of a chat (docs/llm.md).
 *
 * event_json is one JSON object, NUL-terminated, borrowed for the duration
 * of the call: {"event":"token","text":...}, {"event":"tool_call","tool":
 * ...,"arguments":{...}}, {"event":"tool_result","tool":...,"status":...,
 * "duration_ms":...} or {"event":"answer","text":...}, each with the
 * chat's "session", and "handle" when the chat runs asynchronously. The
 * ask_user tool sends {"event":"input_required","id":N,"prompt":...} as it
 * asks the input handler, and {"event":"input_cancelled","id":N} (with
 * "session" and "handle" too) when the call ends before the answer: see
 * clara_input_fn.
 * Threads: called from any thread (the chat's), never concurrently for
 * one chat; it must be thread-safe, return promptly, and call no clara_*
 * function but clara_json_get() and clara_free_string() (to read the
 * event). It must return normally: no longjmp and no C++ exception may
 * cross Clara's frames.
 */
typedef void (*clara_event_fn)(void *userdata, const char *event_json);

/*
 * clara_set_event_handler - send the progress events of chats to fn.
 *
 * Passing fn == NULL stops them (the default). Events of a chat that
 * streams ("stream": true) include each text delta; every chat reports its
 * tool calls, their results and its answer.
 *
 * Ownership: userdata is passed back to fn untouched; Clara never frees it.
 * Threads:   any thread. When this function returns, the previous handler is
 *            not running and will not be called again, so its userdata may
 *            be freed. Do not call it from inside a handler.
 */
void clara_set_event_handler(clara_event_fn fn, void *userdata);

/* ---- Asking the user ---------------------------------------------------- */

/*
 * clara_input_fn - answers the ask_user tool: shows the user a question and
 * returns what they answered (docs/llm.md).
 *
 * request_json is one JSON object, NUL-terminated, borrowed for the
 * duration of the call: {"id":N,"prompt":"...","session":"s"}, with
 * "handle":H when the call runs asynchronously (clara_submit). id is the
 * id of the "input_required" event sent to the event handler just before.
 *
 * Returns:   the answer, NUL-terminated UTF-8 allocated with malloc()
 *            (strdup() will do): Clara frees it with free(); the tool then
 *            answers {"answer":"..."}. NULL means the user declined: the
 *            tool answers {"declined":true}. Invalid UTF-8 is replaced by
 *            U+FFFD.
 * Threads:   called on a thread of Clara's, never the caller's of
 *            clara_evaluate(), possibly for several requests at once; it
 *            may block as long as the user takes, and may call clara_*
 *            functions. It must return normally: no longjmp and no C++
 *            exception may cross Clara's frames.
 * Cancelled: if the call ends first (clara_cancel(), an MCP client's
 *            cancel, its deadline), Clara stops waiting: the tool fails at
 *            once, the event handler gets {"event":"input_cancelled",
 *            "id":N,"session":"s"} (with "handle" as above), and the answer
 *            returned later is freed and dropped. The handler should then
 *            return soon (NULL will do): until it returns, the question
 *            holds the thread it runs on and counts as open. Past
 *            limits.max_open_questions open questions (default 64),
 *            ask_user is refused with tool_failed without asking, so a
 *            handler that waits for its user whatever happens lets
 *            cancelled questions pile up only to that bound. A question
 *            whose call ended before the handler was called is never
 *            handed to it.
 */
typedef char *(*clara_input_fn)(void *userdata, const char *request_json);

/*
 * clara_set_input_handler - let the ask_user tool ask the user through fn.
 *
 * Passing fn == NULL removes it (the default): ask_user then fails with
 * tool_failed ("no input handler is installed") and chats do not offer it
 * to the model. A handler makes ask_user one of the tools a chat with
 * allow_tools offers, under the call's policy like any other.
 *
 * Ownership: userdata is passed back to fn untouched; Clara never frees it.
 * Threads:   any thread. When this function returns, new requests go to the
 *            new handler; requests already handed to the previous one go on
 *            there, so free its userdata only once they have returned.
 *            clara-clips and the CLIPS bridge's registration install one
 *            (docs/clips.md); a host that has its own handler
 *            installs it after registering the bridge.
 */
void clara_set_input_handler(clara_input_fn fn, void *userdata);

/* ---- Approving tool calls ----------------------------------------------- */

/*
 * clara_approval_fn - decides a tool call that waits for a person's
 * approval: one that a rule's "ask" action holds, or a call of a tool whose
 * descriptor says "needs_approval" (docs/rules.md, "Decisions").
 *
 * request_json is one JSON object, NUL-terminated, borrowed for the
 * duration of the call: {"id":N,"tool":"...","session":"s","arguments":
 * {...},"reason":"...","rule":"r","handle":H,"timeout_ms":T}. arguments
 * are the call's validated arguments, with the values of the secrets the
 * configuration names cut out; "rule" is absent for needs_approval: true,
 * "handle" for a call that is not asynchronous; timeout_ms is how long the
 * call waits (policy.approval_timeout_ms). The event handler gets
 * {"event":"approval_required", ...the same fields} just before.
 *
 * Returns:   the decision, NUL-terminated JSON allocated with malloc()
 *            (strdup() will do), which Clara frees with free():
 *              {"decision":"approve"}                        the call runs
 *              {"decision":"approve","arguments":{...}}      it runs with
 *                                  these arguments, checked against the
 *                                  tool's input_schema (a mismatch rejects)
 *              {"decision":"reject","reason":"..."}          it does not
 *                                  run; it fails with "denied" and the
 *                                  reason, which a model is told
 *            Anything else rejects the call (and is logged). NULL decides
 *            nothing now: the approval stays pending until the
 *            approval_decide tool decides it (any thread, clara_evaluate
 *            of {"tool":"approval_decide","arguments":{"id":N,"decision":
 *            "approve"}}) or policy.approval_timeout_ms passes (rejected).
 * Threads:   called on a thread of Clara's, never the caller's of
 *            clara_evaluate(), possibly for several calls at once; it may
 *            block as long as the person takes, and may call clara_*
 *            functions. It must return normally: no longjmp and no C++
 *            exception may cross Clara's frames.
 * Ends:      when the approval stops waiting otherwise (decided through
 *            approval_decide, timed out, its call cancelled), the event
 *            handler gets {"event":"approval_cancelled","id":N,"reason":
 *            "decided" | "timed out" | "cancelled","session":"s"} and a
 *            decision returned later is dropped. Until it returns, the
 *            approval holds the thread it runs on; past
 *            limits.max_open_approvals of them (default 64), calls that
 *            need approval are rejected without asking.
 * Without:   with no handler installed, a call that needs approval is
 *            rejected at once ("denied"), never run.
 */
typedef char *(*clara_approval_fn)(void *userdata, const char *request_json);

/*
 * clara_set_approval_handler - let fn decide the tool calls that wait for
 * approval.
 *
 * Passing fn == NULL removes it (the default): such calls are then
 * rejected. The approvals_list tool lists the calls waiting, and
 * approval_decide decides one, whichever handler is installed.
 *
 * Ownership: userdata is passed back to fn untouched; Clara never frees it.
 * Threads:   any thread. When this function returns, new approvals go to
 *            the new handler; those already handed to the previous one go
 *            on there, so free its userdata only once they have returned.
 *            clara-clips and the CLIPS bridge's registration install one
 *            (docs/clips.md).
 */
void clara_set_approval_handler(clara_approval_fn fn, void *userdata);

/* ---- MCP ------------------------------------------------------------------ */

/*
 * Clara serves its tools to MCP clients (the Model Context Protocol,
 * revision 2025-11-25; docs/mcp.md): the llm_visible tools the
 * configuration's policy allows, never the administrative ones. Every
 * tools/call goes through the whole pipeline (policy, rules, validation,
 * limits, audit) in a Clara session of its own per MCP session. A
 * registration or removal sends notifications/tools/list_changed; a
 * client's notifications/cancelled cancels the call's context.
 */

/*
 * clara_mcp_serve_stdio - serve MCP over a pair of descriptors.
 *
 * Runs on the calling thread until the client closes in_fd's other end (and
 * the answers to what it asked before are written) or clara_mcp_stop() is
 * called. A line that is not a JSON-RPC message is answered with the
 * JSON-RPC error; the session goes on. The descriptors stay the caller's:
 * Clara does not close them.
 *
 * Returns: CLARA_OK when the session ended; -CLARA_EINVAL when serving
 *          could not start (mcp.token_env names an unset variable, a bad
 *          descriptor; the reason is logged).
 */
int clara_mcp_serve_stdio(int in_fd, int out_fd);

/*
 * clara_mcp_listen - serve MCP's Streamable HTTP transport at
 * http://ADDR/mcp, on Clara's own threads; returns at once.
 *
 * addr is "HOST:PORT" (port 0 picks one). Only loopback addresses unless
 * mcp.allow_remote = true; with mcp.token_env set, every request must carry
 * Authorization: Bearer TOKEN. The listener takes the [mcp] settings in
 * force when this is called and keeps them (one started earlier keeps its
 * own until clara_mcp_stop()). At most mcp.max_sessions sessions are open
 * at once over every listener; an initialize beyond is answered HTTP 503
 * with a JSON-RPC error. A session idle for mcp.session_idle_timeout_ms
 * ends.
 *
 * Ownership: addr is borrowed; the returned string is malloc'd (free it
 *            with clara_free_string()).
 * Returns:   {"status":"success","result":{"url":"http://127.0.0.1:PORT/mcp"}}
 *            or an error envelope saying why it cannot listen.
 */
char *clara_mcp_listen(const char *addr);

/*
 * clara_mcp_stop - end every MCP session and listener.
 *
 * Calls in flight are cancelled; clara_mcp_serve_stdio returns. Serving
 * again afterwards starts afresh with the [mcp] settings then in force.
 */
void clara_mcp_stop(void);

/* ---- Asynchronous calls ------------------------------------------------- */

/*
 * A call submitted here runs in the background, on Clara's own threads
 * (or on the thread that waits for it, see clara_wait), under the same pipeline as clara_evaluate (policy, rules, validation,
 * limits, audit); the caller gets a handle at once and collects the
 * envelope later. docs/async.md shows the patterns (a wait per call, or
 * an event loop on clara_async_fd()).
 *
 * Handles are positive, count up from 1 and are never reused. An answer
 * waits until collected by clara_wait(); past async.max_pending answers
 * waiting (default 10,000) the oldest are dropped, with a warning on the
 * log. clara_reset() leaves calls already submitted running.
 */

/*
 * clara_submit - start a request in the background.
 *
 * The request need not say "async": true; a request that does (given to
 * clara_evaluate) is submitted the same way and answered
 * {"status":"accepted","handle":N}.
 *
 * Ownership: request_json is borrowed; Clara copies what the call needs.
 * Returns:   the call's handle (> 0); -CLARA_EINVAL when request_json is
 *            NULL or a request clara_evaluate would refuse before calling
 *            a tool (broken JSON, a bad field, a bad policy);
 *            -CLARA_EBUSY when async.max_running calls (default 1000) are
 *            already running: collect or cancel some first. The reason of
 *            a refusal is logged at warn level. A call that fails once
 *            running (an unknown tool, invalid arguments, a denial) is
 *            submitted: its envelope says why.
 */
int64_t clara_submit(const char *request_json);

/*
 * clara_ready - whether the call's answer is ready, without blocking.
 *
 * Returns: 1 when ready, 0 while it runs, -CLARA_ENOENT for a handle that
 *          Clara never gave, already collected or dropped.
 */
int clara_ready(int64_t handle);

/*
 * clara_wait - collect the call's answer, waiting at most timeout_ms.
 *
 * timeout_ms 0 only looks; a negative timeout_ms waits as long as it takes.
 *
 * Ownership: the returned string is malloc'd; free it with
 *            clara_free_string(). NULL only if malloc fails.
 * Returns:   the call's envelope, exactly as clara_evaluate would have
 *            answered, and the handle is then spent; or
 *            {"status":"pending","handle":N} if it is not finished in
 *            time (the handle stays valid); or an invalid_request envelope
 *            for a handle that is unknown, already collected or dropped.
 * Threads:   blocks the calling thread only; several threads may wait on
 *            different handles. Of two waiting on the same handle, one
 *            gets the answer and the other the invalid_request envelope.
 *            A negative timeout_ms on a call that no thread has started
 *            yet runs it on the calling thread (not a call of a host's
 *            C or Python tool): the same answer, without handing the call
 *            to another thread and back. The thread then returns when the
 *            call stops: a clara_cancel() from another thread makes the
 *            answer ready at once for clara_ready() and the eventfd, and
 *            this thread gets it as soon as the call notices (a C tool
 *            the call runs, through a rule or a chat, first finishes or
 *            times out).
 */
char *clara_wait(int64_t handle, int timeout_ms);

/*
 * clara_cancel - cancel a call.
 *
 * The call's context is cancelled: an HTTP call, a model's chat or a tool
 * that watches its deadline stops, and a tool that has not started yet
 * never starts (an on_tool_call rule cut short denies it). A C tool already
 * running cannot be stopped: it finishes on its worker thread and its
 * result is discarded.
 * Either way the answer is ready at once, a tool_failed envelope saying
 * the call was cancelled. Cancelling a finished call changes nothing.
 *
 * Returns: CLARA_OK, or -CLARA_ENOENT for an unknown or collected handle.
 */
int clara_cancel(int64_t handle);

/*
 * clara_async_fd - a descriptor that becomes readable when answers are ready.
 *
 * An eventfd (Linux): add it to epoll/poll/select or an event loop
 * (libuv, asyncio's add_reader). When it is readable, read 8 bytes from it
 * to reset it, then call clara_async_take() and collect the handles it
 * lists with clara_wait(handle, 0). It is written once per batch: after it
 * became readable it becomes readable again only once clara_async_take()
 * has taken every finished call (so always call clara_async_take() after
 * a wake-up). Answers that were ready before the first call make it
 * readable at once.
 *
 * Ownership: the descriptor belongs to Clara and lives as long as the
 *            process; never close it. (A host that closes it anyway loses
 *            its wake-ups, never a file: Clara writes through a descriptor
 *            of its own, checks before each write that this number still
 *            names the eventfd, and when it does not, stops signalling it
 *            and logs a warning; the next clara_async_fd() then returns a
 *            new descriptor.)
 * Returns:   the descriptor, the same on every call (but after the misuse
 *            above); -CLARA_EINTERNAL if the system refused to create it
 *            (the reason is logged).
 */
int clara_async_fd(void);

/*
 * clara_async_take - the calls finished since the last clara_async_take.
 *
 * Each finished call is listed once, oldest first, at most max of them
 * (max <= 0: all): [{"handle":3,"tool":"echo","status":"success"}, ...],
 * "[]" when none. Their answers stay until collected with clara_wait(); a
 * call collected before it was taken is not listed, nor counted against
 * max.
 *
 * Ownership: malloc'd; free it with clara_free_string(). NULL only if
 *            malloc fails.
 */
char *clara_async_take(int max);

/* ---- Status codes ------------------------------------------------------- */

/* Functions returning int return CLARA_OK or the negative of one of these. */
#define CLARA_OK        0
#define CLARA_EINVAL    1 /* an argument is NULL or invalid */
#define CLARA_ENOMEM    2 /* malloc failed */
#define CLARA_EINTERNAL 3 /* a bug in Clara; details are on the log */
#define CLARA_ENOENT    4 /* no such tool, or no such asynchronous call */
#define CLARA_EPERM     5 /* not allowed on a built-in tool */
#define CLARA_EBUSY     6 /* too many asynchronous calls running (async.max_running) */

/*
 * clara_strerror - describe a status code; code may be given as CLARA_E*
 * or as the negative value a function returned.
 *
 * Ownership: a static string; never free it.
 * Returns:   a short English description; "unknown status code" for a code
 *            Clara does not define.
 */
const char *clara_strerror(int code);

#ifdef __cplusplus
}
#endif

#endif /* CLARA_H */
