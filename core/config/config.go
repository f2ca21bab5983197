package config

// Config is the typed configuration in force. It is immutable once built;
// a change builds a new one and swaps it in. Each field is one key (see the
// package comment for the tags); the order of the fields is the order of
// default_config.toml and of the documentation table.
type Config struct {
	DefaultEvaluator string `key:"default_evaluator" default:"'echo'" check:"tool_name" doc:"The tool that receives simple-form requests (requests without \"tool\")."`
	TestMode         bool   `key:"test_mode" default:"false" doc:"true: tools with the network, fs_write or exec capability do not run; each call answers {\"test_mode\": true, \"skipped\": NAME}. CLARA_TEST_MODE=1 in the environment turns it on too; CLARA_TEST_ALLOW=1 lets such tools run anyway."`
	// Tools are the [[tools]] tables: Lua tools (SPEC §8), each a
	// descriptor plus lua or lua_file. Checked by checkToolEntries.
	Tools       []map[string]any `key:"tools" default:"[]" check:"tools" doc:"Tools written in Lua, declared as [[tools]] tables (a descriptor plus lua or lua_file); none by default. See docs/lua.md."`
	ProjectRoot string           `key:"project_root" default:"'.'" doc:"The directory every relative path of the configuration is relative to (rule and plugin paths, state_dir, audit.path, lua_file, callbacks' cwd, [[mcp_servers]] command and cwd). A relative project_root is relative to the folder of the configuration file that gives it (CLARA_CONFIG, bin/clara --config), or the working directory for clara_configure's text; a configuration file that gives none makes its own folder the project root."`
	StateDir    string           `key:"state_dir" default:"'.clara'" doc:"Where Clara keeps what must survive a restart (the rule state in state.db, callbacks), relative to project_root; created only when something is stored. \"\" keeps the state in memory for the life of the process."`
	// Clear is what one clara_configure call forgets; never kept.
	Clear []string `key:"clear" default:"[]" check:"clear" oneshot:"true" doc:"What this clara_configure call forgets, applied once and not kept: \"rules\" (rules added at run time by rules_load) and \"session_policies\" (every session's policy layer). The host's way back in when a rule or a session policy locked it out."`

	Limits    Limits    `key:"limits" doc:"Default limits of tool calls and requests."`
	Policy    Policy    `key:"policy" doc:"The configuration's layer of tool policy."`
	Audit     Audit     `key:"audit" doc:"Where the record of every call goes besides the in-memory ring."`
	Log       Log       `key:"log" doc:"Clara's own log (CLARA_LOG sets its level)."`
	Telemetry Telemetry `key:"telemetry" doc:"OpenTelemetry traces, metrics and the audit as OTLP logs (see docs/observability.md). Off unless enabled here or by the OTEL_* variables of the environment."`
	Rules     Rules     `key:"rules" doc:"The rule engine."`
	Plugins   Plugins   `key:"plugins" doc:"Plugins: folders of rules, scripts and a plugin.toml (see docs/rules.md)."`
	Async     Async     `key:"async" doc:"Calls run in the background (clara_submit, \"async\": true)."`
	KV        KV        `key:"kv" doc:"The session-scoped key-value store of kv_set, kv_get, kv_delete and kv_list: how much it holds."`
	Notices   Notices   `key:"notices" doc:"The notices waiting in a session's queue (notifications_drain, and a chat's next turn): how repeats are merged."`
	DocSearch DocSearch `key:"doc_search" doc:"The doc_search tool: full-text search over the project's documents."`
	Store     Store     `key:"store" doc:"Where the state that processes may share lives: rule state, rate windows, budgets, conversations, approvals, notices (see docs/deployment.md)."`

	Network   Network   `key:"network" doc:"Outbound HTTP: which hosts the evaluator, HTTP tools and models may reach."`
	Evaluator Evaluator `key:"evaluator" doc:"The evaluate tool: a JSON endpoint that answers requests (seed 000's daemon)."`
	LLM       LLM       `key:"llm" doc:"The model the chat tool talks to."`
	MCP       MCP       `key:"mcp" doc:"Serving Clara's tools over the Model Context Protocol (clara_mcp_listen, clara mcp). Each clara_mcp_listen takes the settings in force when it is called."`
	// MCPServers are the remote MCP servers whose tools Clara governs.
	// Callbacks are the [[callbacks]] tables: file-change callbacks
	// declared with the project (checked by the engine, which knows them).
	Callbacks     []map[string]any `key:"callbacks" default:"[]" doc:"File-change callbacks declared with the project, beside those the callback_* tools create: [[callbacks]] tables with name, pattern and run (the script, for bash), and any of description, blocking, timeout_secs, success_message, cwd, one_at_a_time, once_per_batch, on_busy (\"queue\" or \"skip\"), pass_files (\"env\", \"args\" or \"stdin\"). Active for every session. See docs/callbacks.md."`
	CallbackTools CallbackTools    `key:"callback_tools" doc:"Callbacks in a model's hands (seed 001): the callback tools offered to models, whether the scripts they write run, the panel they see."`
	// Resources and Prompts are the [[resources]] and [[prompts]] tables:
	// what MCP clients read and ask for beside the tools (checked by the
	// engine, which knows project_root and the policy).
	Resources  []map[string]any `key:"resources" default:"[]" doc:"Resources served to MCP clients (resources/list, resources/read), governed by the policy as tools are, by name: [[resources]] tables with name, uri (or uri_template with {var} parts), and text or file (under project_root); optional title, description, mime_type, max_bytes, complete = { VAR = [values] }. See docs/mcp.md."`
	Prompts    []map[string]any `key:"prompts" default:"[]" doc:"Prompts served to MCP clients (prompts/list, prompts/get), governed by the policy as tools are, by name: [[prompts]] tables with name, description, arguments = [{ name, description, required, values }] and messages = [{ role, text }] or [{ role, content = MCP content block }], {argument} replaced by its value. See docs/mcp.md."`
	MCPServers []map[string]any `key:"mcp_servers" default:"[]" doc:"Remote MCP servers whose tools become Clara tools named NAME__TOOL, under Clara's policy, rules, limits and audit: [[mcp_servers]] tables with name, and command/args/env_from/cwd (stdio; a command written as a path and cwd are relative to project_root, where the server runs by default) or url/headers_env/oauth (Streamable HTTP); tools = { allow, deny }, prefix, eager, init_timeout_ms, timeout_ms, replace, max_tools, max_description_bytes, max_schema_bytes. See docs/mcp.md."`
}

// CallbackTools is the [callback_tools] table: what of the callbacks a
// model reaches (seed 001, where the model creates and manages them).
type CallbackTools struct {
	Models          bool `key:"models" default:"false" doc:"true offers callback_upsert, callback_toggle, callback_list and callback_get to models (a chat's tools) and lets calls made by models, rules and tools reach them, as ordinary tools: policy and on_tool_call rules govern them. false keeps them administrative (policy.admin_in_nested_calls)."`
	RunModelScripts bool `key:"run_model_scripts" default:"false" doc:"true lets the scripts a model wrote (created or edited through callback_upsert in a model's call) run when their callbacks fire; false lists them but never runs them, with a notice. The host's own edit of such a script lets it run again."`
	PanelBytes      int  `key:"panel_bytes" default:"2048" min:"0" max:"65536" doc:"With models = true, the callbacks panel a chat's model sees in its system prompt at each turn (the session's callbacks, whether each is active, its last result), cut to this many bytes; 0: no panel."`
}

// MCP is the [mcp] table.
type MCP struct {
	AllowRemote bool   `key:"allow_remote" default:"false" doc:"true lets clara_mcp_listen bind an address that is not loopback; false serves this machine only."`
	TokenEnv    string `key:"token_env" default:"''" doc:"The environment variable holding a bearer token every HTTP request must carry (Authorization: Bearer TOKEN); empty: no token."`
	// The [mcp] keys are read by each clara_mcp_listen: a listener keeps
	// the settings it started with.
	MaxSessions          int `key:"max_sessions" default:"100" min:"1" max:"100000" doc:"The most MCP sessions open at once over HTTP, every listener together: an initialize beyond is refused with HTTP 503 and a JSON-RPC error until a session ends."`
	SessionIdleTimeoutMS int `key:"session_idle_timeout_ms" default:"1800000" min:"1000" max:"86400000" doc:"An HTTP session that sends no request for this many milliseconds is ended, and its Clara session with it (session_end)."`
	// Read when serving starts (the first listen or stdio serve after a
	// stop): the server keeps them until clara_mcp_stop.
	ListTTLMS       int `key:"list_ttl_ms" default:"5000" min:"0" max:"86400000" doc:"How long a client may keep tools/list, prompts/list and the resource lists before asking again (their ttlMs, cacheScope private); 0: not at all. Read when serving starts."`
	MaxWaitingCalls int `key:"max_waiting_calls" default:"256" min:"1" max:"100000" doc:"The most tool calls of 2026-07-28 clients waiting between rounds for their client's answer (input_required); a call that would be one more is refused with an error result. Read when serving starts."`
	TaskAfterMS     int `key:"task_after_ms" default:"2000" min:"0" max:"86400000" doc:"A tool call of a client that declared the tasks extension (io.modelcontextprotocol/tasks) and has not finished after this many milliseconds is answered with a task, followed with tasks/get; 0: never. Read when serving starts."`
	TaskTTLMS       int `key:"task_ttl_ms" default:"3600000" min:"1000" max:"604800000" doc:"How long a task is kept from its creation (its ttlMs): then it is cancelled if it still runs, and forgotten. Read when serving starts."`
	WaitTimeoutMS   int `key:"wait_timeout_ms" default:"600000" min:"1000" max:"86400000" doc:"How long a tool call waits for its 2026-07-28 client's next round (the answer to its input_required) before it is cancelled. Read when serving starts."`
	// Read at each call, not at the listen: a client runs its calls at
	// once, each on a goroutine (a C or Python tool's also on a thread), so
	// their number is bounded whatever the transport.
	MaxCalls int `key:"max_calls" default:"64" min:"1" max:"100000" doc:"The most tools/call requests of MCP clients running at once, every session and transport together (each may hold a thread while a C or Python tool runs): a call beyond is answered at once with an error (isError, tool_failed) until one ends."`
}

// KV is the [kv] table: the limits of the key-value store, in one session
// and in all of them together. A value is at most 64 KiB and a key 256
// bytes whatever these say.
type KV struct {
	MaxKeys       int `key:"max_keys" default:"10000" min:"1" max:"10000000" doc:"The most keys one session's store holds: a kv_set of a new key beyond fails (tool_failed, details.limit names the key)."`
	MaxBytes      int `key:"max_bytes" default:"16777216" min:"1024" max:"1073741824" doc:"The most bytes (keys and values) one session's store holds."`
	MaxTotalKeys  int `key:"max_total_keys" default:"100000" min:"1" max:"100000000" doc:"The most keys all sessions' stores hold together: every session a request or an MCP client names has a store of its own."`
	MaxTotalBytes int `key:"max_total_bytes" default:"67108864" min:"1024" max:"17179869184" doc:"The most bytes (keys and values) all sessions' stores hold together."`
}

// Notices is the [notices] table: the session's queue of notices, which
// batches them as the seed's accumulator does.
type Notices struct {
	DedupeWindowMS int `key:"dedupe_window_ms" default:"60000" min:"0" max:"86400000" doc:"A notice identical to one its session's queue received less than this many milliseconds before (the same rule or callback, message, priority, event and delivery), and not yet delivered, is not queued again: the queued one counts it (\"count\": N in notifications_drain). 0 queues every notice."`
}

// Store is the [store] table (issue 31): the embedded default, or one
// PostgreSQL that every process of a deployment shares.
type Store struct {
	Backend            string        `key:"backend" default:"'sqlite'" check:"store_backend" doc:"\"sqlite\": each process keeps its own state, rule state in SQLite under state_dir, the rest in memory. \"postgres\": rule state, rate windows, budgets per session, conversations, pending approvals and session notices live in the PostgreSQL database url_env names, shared by every process that names it, and rules_load and plugin_enable reach every such process."`
	URLEnv             string        `key:"url_env" default:"'CLARA_DATABASE_URL'" doc:"The environment variable holding the PostgreSQL URL (postgres://USER:PASSWORD@HOST:PORT/DB), password included: the URL is never written in the configuration and never appears in a log line, an error or an envelope."`
	PoolSize           int           `key:"pool_size" default:"8" min:"1" max:"1000" doc:"The most connections a process opens to PostgreSQL for calls (one more listens for the other processes' changes)."`
	StatementTimeoutMS int           `key:"statement_timeout_ms" default:"2000" min:"1" max:"3600000" doc:"How long one use of PostgreSQL may take, waiting for a connection included, in milliseconds (never longer than the call's own deadline): past it the call answers unavailable, or falls back as on_unavailable says."`
	RetentionHours     int           `key:"conversation_retention_hours" default:"720" min:"0" max:"876000" doc:"A conversation nobody continued for this many hours is deleted from PostgreSQL; 0 keeps them until session_end."`
	OnUnavailable      OnUnavailable `key:"on_unavailable" doc:"What a call does, for each kind of shared state, when PostgreSQL cannot be reached in time: \"fail\" answers unavailable, naming the store; \"local\" carries on with this process's own (its SQLite state, its own windows and budgets, its memory), which is not merged back later."`
}

// OnUnavailable is the [store.on_unavailable] table.
type OnUnavailable struct {
	State         string `key:"state" default:"'fail'" check:"on_unavailable" doc:"Rule state (state_get, state_set, rules' set_state): \"local\" reads and writes the SQLite state under state_dir while PostgreSQL is away."`
	Limits        string `key:"limits" default:"'fail'" check:"on_unavailable" doc:"rate_per_min and max_calls_per_session: \"fail\" refuses the call (a limit is never exceeded because of a fault); \"local\" counts in this process only."`
	Conversations string `key:"conversations" default:"'fail'" check:"on_unavailable" doc:"A chat with a session and chat_history: \"local\" continues the conversation this process holds in memory."`
	Approvals     string `key:"approvals" default:"'fail'" check:"on_unavailable" doc:"Calls held for approval: \"fail\" rejects them; \"local\" lets only this process's approval handler and approval_decide decide them."`
	Notices       string `key:"notices" default:"'local'" check:"on_unavailable" doc:"Notices queued for a session: \"local\" keeps them in this process until a drain; \"fail\" drops them (logged), and notifications_drain answers unavailable."`
}

// The backends of store.backend and what store.on_unavailable may say.
const (
	BackendSQLite    = "sqlite"
	BackendPostgres  = "postgres"
	UnavailableFail  = "fail"
	UnavailableLocal = "local"
)

// DocSearch is the [doc_search] table.
type DocSearch struct {
	Patterns     []string `key:"patterns" default:"['**/*.md']" doc:"The documents doc_search indexes: glob patterns relative to project_root (\"/\"-separated; ** is any number of folders; a wildcard never matches a name starting with a dot); none may leave project_root. Symbolic links are not followed. Empty: doc_search finds nothing."`
	MaxFiles     int      `key:"max_files" default:"10000" min:"1" max:"1000000" doc:"The most files doc_search indexes; past it the others are left out, with a warning in the log."`
	MaxFileBytes int      `key:"max_file_bytes" default:"1048576" min:"1" max:"1073741824" doc:"Files larger than this many bytes are left out of doc_search's index (so are files that hold a NUL byte)."`
	Watch        bool     `key:"watch" default:"true" doc:"true keeps doc_search's index current with a file watcher on the folders that may hold documents; false (or folders that cannot be watched) makes each search look for changed files first."`
}

// Network is the [network] table.
type Network struct {
	AllowHosts []string `key:"allow_hosts" default:"[]" doc:"The only hosts outbound requests may reach: exact names, \"*.example.com\", addresses or CIDR prefixes. Empty: the hosts this configuration names (llm.base_url, evaluator.url, each HTTP tool's url, each [[mcp_servers]] url); with a list, an [[mcp_servers]] url it does not name is a configuration error. A link-local or metadata address (169.254.0.0/16, fe80::/10, ...) is reached only when this list names it: not through a name that resolves to one, nor because a URL of the configuration names one."`
}

// Evaluator is the [evaluator] table.
type Evaluator struct {
	URL       string `key:"url" default:"''" doc:"Where the evaluate tool POSTs its arguments, e.g. \"http://localhost:8000/evaluate\"; the JSON answer is the result. Empty: evaluate fails, saying so."`
	TimeoutMS int    `key:"timeout_ms" default:"30000" min:"1" max:"86400000" doc:"The evaluate tool's deadline in milliseconds, retries included."`
}

// LLM is the [llm] table.
type LLM struct {
	Provider           string `key:"provider" default:"''" doc:"\"openai\" (POST base_url/chat/completions: OpenAI, vLLM, llama.cpp, Ollama, OpenRouter), \"anthropic\" (POST base_url/v1/messages) or \"gemini\" (Google's POST base_url/v1beta/models/MODEL:generateContent). Empty: read from each chat's model, \"claude-*\" anthropic, \"gemini-*\" gemini, \"gpt-*\" and \"o1\", \"o3-mini\", ... openai, any other name OpenAI's format at base_url."`
	BaseURL            string `key:"base_url" default:"''" doc:"The provider's URL, e.g. \"http://localhost:11434/v1\" or \"https://api.anthropic.com\". Empty: the provider's own endpoint (https://api.openai.com/v1, https://api.anthropic.com, https://generativelanguage.googleapis.com, the key then in OPENAI_API_KEY, ANTHROPIC_API_KEY or GOOGLE_GENERATIVE_AI_API_KEY unless api_key_env says) when the provider is known; otherwise chat fails, saying so. On openrouter.ai the key is in OPENROUTER_API_KEY unless api_key_env says."`
	Model              string `key:"model" default:"''" doc:"The model a chat uses unless it names one."`
	APIKeyEnv          string `key:"api_key_env" default:"''" doc:"The environment variable holding the API key (never the key itself); empty sends none."`
	TimeoutMS          int    `key:"timeout_ms" default:"60000" min:"1" max:"86400000" doc:"One model call's deadline in milliseconds, retries included."`
	ContextWindow      int    `key:"context_window" default:"0" min:"0" max:"100000000" doc:"The model's context in tokens: context.turn.token_usage is the last call's tokens over it (0: unknown, token_usage stays 0)."`
	MaxRetries         int    `key:"max_retries" default:"2" min:"0" max:"10" doc:"Retries of a model call or HTTP tool after 408, 409, 429, 5xx (as the official OpenAI SDK; a server's x-should-retry header has the last word) or a dropped connection, with backoff honouring Retry-After."`
	MaxResponseBytes   int    `key:"max_response_bytes" default:"4194304" min:"1024" max:"1073741824" doc:"The largest answer read from a model, the evaluator, an HTTP tool or an [[mcp_servers]] url server (for a server's event stream, the largest event); past it the call fails."`
	MaxTokens          int    `key:"max_tokens" default:"0" min:"0" max:"10000000" doc:"max_tokens sent when a chat gives none (0: none for openai, 4096 for anthropic, which requires one)."`
	MaxHistoryMessages int    `key:"max_history_messages" default:"100" min:"1" max:"100000" doc:"The most messages a session's conversation keeps; the oldest go first."`
	AppURL             string `key:"app_url" default:"''" doc:"Sent as HTTP-Referer to OpenRouter (a base_url on openrouter.ai), which lists requests under it; empty sends none. No other server gets it."`
	AppTitle           string `key:"app_title" default:"'Clara'" doc:"Sent as X-Title to OpenRouter (a base_url on openrouter.ai), the name it shows for the requests; empty sends none. No other server gets it."`
	EmbeddingModel     string `key:"embedding_model" default:"''" doc:"The model of POST base_url/embeddings (OpenAI's format), which semantic rule conditions use. Empty: a rule with a semantic condition does not load."`
}

// Async is the [async] table.
type Async struct {
	MaxRunning int `key:"max_running" default:"1000" min:"1" max:"1000000" doc:"The most asynchronous calls running at once: a submit beyond is refused, never queued."`
	MaxPending int `key:"max_pending" default:"10000" min:"1" max:"10000000" doc:"The most finished asynchronous calls whose answers wait to be collected: past it the oldest answers are dropped, with a warning in the log."`
}

// Limits is the [limits] table.
type Limits struct {
	TimeoutMS       int `key:"timeout_ms" default:"1000" min:"1" max:"86400000" doc:"A tool's deadline in milliseconds, unless its descriptor sets timeout_ms."`
	MaxOutputBytes  int `key:"max_output_bytes" default:"65536" min:"1" max:"1073741824" doc:"A tool's output cap in bytes, unless its descriptor sets max_output_bytes: longer string results are truncated, larger JSON results are refused."`
	MaxRequestBytes int `key:"max_request_bytes" default:"16777216" min:"1" max:"1073741824" doc:"Requests and events larger than this many bytes are refused with invalid_request; so are configuration texts, past this or 1 MiB, whichever is larger."`
	MaxDepth        int `key:"max_depth" default:"512" min:"1" max:"1048576" doc:"Requests nested deeper than this many arrays/objects are refused with invalid_request. The same bound holds for the arguments of a model's or an MCP client's tool call, and for a JSON result of a tool that is not built in or the evaluator's answer (tool_failed)."`
	MaxToolCalls    int `key:"max_tool_calls" default:"20" min:"1" max:"256" doc:"The tool calls a chat may make unless it says max_tool_calls: a model that still asks for tools once they are spent gets one last call without tools, and if it asks again the chat fails with limit_exceeded."`
	MaxTurns        int `key:"max_turns" default:"10" min:"0" max:"10000" doc:"The model calls one chat may make unless it says max_turns (the OpenAI Agents SDK's default is 10 too), the last of them without tools so that the model answers; a model that still asks for tools then makes the chat fail with limit_exceeded. 0: no bound but max_tool_calls."`

	// Budgets of calls per tool (issue 28), unless a tool's descriptor
	// sets its own (limits.max_calls_per_chat, max_calls_per_session).
	MaxCallsPerChat    int `key:"max_calls_per_chat" default:"0" min:"0" max:"1000000" doc:"How many times one chat's model may call each tool, unless the tool's descriptor sets limits.max_calls_per_chat; past it the model gets {\"error\": \"budget_exhausted\", \"tool\": NAME} and on_budget_exhausted fires. 0: no budget. The administrative tools have none."`
	MaxCallsPerSession int `key:"max_calls_per_session" default:"0" min:"0" max:"1000000000" doc:"How many times each tool may be called in one session (until session_end), unless the tool's descriptor sets limits.max_calls_per_session; past it calls fail with budget_exhausted and on_budget_exhausted fires. 0: no budget. The administrative tools have none."`

	// Host code that goes on running after its caller gave up on it, each
	// on a thread of its own until it returns (issue 25): bounded so that
	// cancelling cannot exhaust the process's threads.
	MaxOpenQuestions int `key:"max_open_questions" default:"64" min:"1" max:"4096" doc:"The most ask_user questions the input handler may hold at once, those whose call was cancelled or timed out counted until the handler returns from them (each holds a thread): past it ask_user is refused with tool_failed, without asking. A handler learns that a question was cancelled from the input_cancelled event."`
	MaxOpenApprovals int `key:"max_open_approvals" default:"64" min:"1" max:"4096" doc:"The most approvals the approval handler may hold at once, those whose call ended first counted until the handler returns from them (each holds a thread): past it a call that needs approval is rejected without asking."`
	MaxOverdueCalls  int `key:"max_overdue_calls" default:"64" min:"1" max:"4096" doc:"The most calls of C and Python tools that ran past their deadline while the tool's function goes on running, each holding a thread until it returns: past it a call of any C or Python tool (but one that runs on_caller_thread) is refused with tool_failed until one of them returns."`
}

// Policy is the [policy] table.
type Policy struct {
	Allow []string `key:"allow" default:"[]" check:"tool_name" doc:"Tools any call may use; empty allows every registered tool."`
	Deny  []string `key:"deny" default:"[]" check:"tool_name" doc:"Tools no call may use; deny wins over allow."`
	// AdminInNestedCalls lets calls made by rules, Lua and models reach the
	// administrative tools.
	AdminInNestedCalls bool `key:"admin_in_nested_calls" default:"false" doc:"true lets calls made by rules (call_tool), Lua scripts and tools reach the administrative tools (rules_*, session_policy, state_*, callback_*); false keeps those for the host's own requests."`
	// ApprovalTimeoutMS bounds how long a call held for approval waits.
	ApprovalTimeoutMS int `key:"approval_timeout_ms" default:"120000" min:"1" max:"86400000" doc:"How long a call that a rule's ask or the tool's needs_approval holds waits for a person's decision (the approval handler, approval_decide), in milliseconds; past it the call is rejected, never run."`
}

// Audit is the [audit] table.
type Audit struct {
	Path       string `key:"path" default:"''" doc:"Where every call is appended as one JSON line besides the in-memory ring that audit_tail reads: a regular file (relative to project_root), a named pipe with a reader, \"-\" or \"/dev/stdout\" (standard output), \"/dev/stderr\"; empty keeps only the ring. audit_reopen (clara_audit_reopen) reopens it after a log rotation moved it."`
	MaxSizeMB  int    `key:"max_size_mb" default:"0" min:"0" max:"1048576" doc:"Rotate the audit file when it reaches this many megabytes (the old one renamed with a timestamp beside it); 0 never rotates."`
	MaxBackups int    `key:"max_backups" default:"0" min:"0" max:"100000" doc:"The most rotated audit files kept (0: all, unless max_age_days removes them)."`
	MaxAgeDays int    `key:"max_age_days" default:"0" min:"0" max:"36500" doc:"Rotated audit files older than this many days are removed (0: kept)."`
	Compress   bool   `key:"compress" default:"false" doc:"true gzips rotated audit files."`
	// DecisionIDs puts the call's decision id into every envelope.
	DecisionIDs bool `key:"decision_ids" default:"false" doc:"true: every envelope carries the call's decision_id, the id of its audit record, for a user to quote. It is there anyway when audit.path is set, when telemetry is on, and in an answer with a trace."`
}

// Log is the [log] table.
type Log struct {
	Format string `key:"format" default:"'text'" check:"log_format" doc:"\"text\": key=value lines; \"json\": one JSON object per message, on standard error and in the message a log handler receives."`
}

// Telemetry is the [telemetry] table.
type Telemetry struct {
	Enabled          bool   `key:"enabled" default:"false" doc:"true exports traces, metrics and logs over OTLP/HTTP to endpoint. The standard OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_TRACES_EXPORTER (and _METRICS_, _LOGS_) variables turn them on as well; OTEL_SDK_DISABLED=true turns everything off."`
	Endpoint         string `key:"endpoint" default:"''" doc:"The OTLP/HTTP base URL, e.g. \"http://localhost:4318\" (signals go to /v1/traces, /v1/metrics, /v1/logs). Empty: OTEL_EXPORTER_OTLP_ENDPOINT, else http://localhost:4318."`
	ServiceName      string `key:"service_name" default:"''" doc:"service.name of what Clara exports. Empty: OTEL_SERVICE_NAME, else \"clara\"."`
	Traces           bool   `key:"traces" default:"true" doc:"With enabled: export spans."`
	Metrics          bool   `key:"metrics" default:"true" doc:"With enabled: export metrics."`
	Logs             bool   `key:"logs" default:"true" doc:"With enabled: export every audit record as an OTLP log record."`
	Content          bool   `key:"content" default:"false" doc:"true records prompts, answers, tool arguments and results on spans, after every secret Clara knows is cut out. Off, spans carry names, ids, sizes and outcomes only."`
	MetricIntervalMS int    `key:"metric_interval_ms" default:"60000" min:"100" max:"86400000" doc:"How often metrics are exported, in milliseconds; OTEL_METRIC_EXPORT_INTERVAL, when set, wins."`
}

// Rules is the [rules] table.
type Rules struct {
	Paths   []string `key:"paths" default:"['.clara/rules/*.toml']" doc:"Rule files (TOML or JSON): glob patterns relative to project_root (** matches any number of directories, {a,b} either). A relative pattern may not leave project_root; an absolute one is taken as given. A pattern a configuration gives that matches no file is an error of that configuration; only the default may match nothing."`
	Builtin bool     `key:"builtin" default:"true" doc:"Load the built-in rules (token_budget, iteration_budget, large_result, repeated_failure)."`
	// WatchAdminTools lets on_tool_call rules deny the administrative
	// tools.
	WatchAdminTools bool       `key:"watch_admin_tools" default:"false" doc:"true lets on_tool_call rules deny the administrative tools too; false keeps rules_load, session_policy and the other administrative tools out of their reach, so that a rule cannot lock the host out."`
	Mode            string     `key:"mode" default:"'enforce'" check:"rule_mode" doc:"\"shadow\" puts every rule in shadow mode: its decisions (deny, ask, rewrite, block, redact) are recorded in the trace and the audit as would_deny, would_ask, ... and counted in rules_list, but not enforced; \"enforce\" leaves each rule to its own mode (mode = \"shadow\" in a rule or at the top of its file)."`
	RedactSecrets   bool       `key:"redact_secrets" default:"false" doc:"true loads the built-in rules redact_secrets and redact_secrets_answer, which cut what looks like an API key, a token or a private key out of every tool result and every chat's answer."`
	MaxEmissions    int        `key:"max_emissions" default:"1000" min:"1" max:"1000000" doc:"The most events one emission may set off, counting every event its rules emit (emit_event) however deep: past it the rest are refused with an error in the answer."`
	Watch           bool       `key:"watch" default:"true" doc:"true: the rule files, their Lua scripts and the plugins in force are watched, and a change reloads them (as rules_load does: a broken file keeps the rules in force and logs where it is broken). Only with a state_dir: \"\" (an engine without a disk of its own) watches nothing."`
	Thresholds      Thresholds `key:"thresholds" doc:"What rules see as thresholds.NAME: the built-in rules' settings, and any number a project's own rules read."`
}

// Plugins is the [plugins] table.
type Plugins struct {
	Paths []string `key:"paths" default:"['.clara/plugins/*']" doc:"Plugin folders: glob patterns relative to project_root; each folder holding a plugin.toml is a plugin, its rules in rules/*.toml and its scripts in scripts/*.lua. A pattern a configuration gives that matches no plugin folder is an error of that configuration; only the default may match nothing."`
}

// Thresholds is the [rules.thresholds] table.
type Thresholds struct {
	TokenBudget      float64            `key:"token_budget" default:"0.8" doc:"token_budget: fraction of the token budget spent."`
	IterationBudget  float64            `key:"iteration_budget" default:"25" doc:"iteration_budget: turn number."`
	LargeResultBytes float64            `key:"large_result_bytes" default:"32768" doc:"large_result: bytes of a tool result."`
	RepeatedFailures float64            `key:"repeated_failures" default:"3" doc:"repeated_failure: failures of one tool in a row."`
	Other            map[string]float64 `key:"*" doc:"Any other number, read by a project's rules as thresholds.NAME."`
}

// Map is the thresholds as rules read them: thresholds.NAME.
func (t Thresholds) Map() map[string]any {
	m := map[string]any{
		"token_budget":       t.TokenBudget,
		"iteration_budget":   t.IterationBudget,
		"large_result_bytes": t.LargeResultBytes,
		"repeated_failures":  t.RepeatedFailures,
	}
	for k, v := range t.Other {
		m[k] = v
	}
	return m
}
