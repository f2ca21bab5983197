package telemetry

// The names of spans, attributes and metrics, in one place.
//
// They follow the OpenTelemetry semantic conventions for generative AI and
// for the Model Context Protocol, which are still marked "Development" and
// have no Go package. The version used is semantic-conventions-genai
// v0.1.0:
//
//	https://github.com/open-telemetry/semantic-conventions-genai/blob/v0.1.0/docs/gen-ai/gen-ai-spans.md
//	https://github.com/open-telemetry/semantic-conventions-genai/blob/v0.1.0/docs/gen-ai/gen-ai-metrics.md
//	https://github.com/open-telemetry/semantic-conventions-genai/blob/v0.1.0/docs/gen-ai/mcp.md
//
// and, for error.type, server.*, network.* and jsonrpc.*, the general
// conventions they reference (v1.41). Names of Clara's own start with
// "clara.".

// SchemaURL is the schema of the general conventions the GenAI ones build
// on.
const SchemaURL = "https://opentelemetry.io/schemas/1.41.0"

// Operation names (gen_ai.operation.name), which also start span names.
const (
	OpChat        = "chat"         // one model call: "chat {model}"
	OpInvokeAgent = "invoke_agent" // a chat, the agent's run: "invoke_agent clara"
	OpExecuteTool = "execute_tool" // one tool call: "execute_tool {tool}"
	OpEmbeddings  = "embeddings"
)

// GenAI attributes.
const (
	AttrOperationName     = "gen_ai.operation.name"
	AttrProviderName      = "gen_ai.provider.name"
	AttrRequestModel      = "gen_ai.request.model"
	AttrRequestMaxTokens  = "gen_ai.request.max_tokens"
	AttrResponseModel     = "gen_ai.response.model"
	AttrResponseID        = "gen_ai.response.id"
	AttrFinishReasons     = "gen_ai.response.finish_reasons"
	AttrInputTokens       = "gen_ai.usage.input_tokens"
	AttrOutputTokens      = "gen_ai.usage.output_tokens"
	AttrConversationID    = "gen_ai.conversation.id"
	AttrAgentName         = "gen_ai.agent.name"
	AttrToolName          = "gen_ai.tool.name"
	AttrToolCallID        = "gen_ai.tool.call.id"
	AttrToolType          = "gen_ai.tool.type"
	AttrToolCallArguments = "gen_ai.tool.call.arguments" // opt-in content
	AttrToolCallResult    = "gen_ai.tool.call.result"    // opt-in content
	AttrInputMessages     = "gen_ai.input.messages"      // opt-in content
	AttrOutputMessages    = "gen_ai.output.messages"     // opt-in content
	AttrTokenType         = "gen_ai.token.type"          // on gen_ai.client.token.usage
	TokenTypeInput        = "input"
	TokenTypeOutput       = "output"
	ToolTypeFunction      = "function"  // a tool Clara runs itself (built-in, C, Python, Lua, HTTP)
	ToolTypeExtension     = "extension" // a remote MCP server's tool
	AgentName             = "clara"
)

// General attributes.
const (
	AttrErrorType        = "error.type"
	AttrServerAddress    = "server.address"
	AttrServerPort       = "server.port"
	AttrNetworkTransport = "network.transport"
	ErrorTypeOther       = "_OTHER"
)

// MCP attributes.
const (
	AttrMCPMethodName      = "mcp.method.name"
	AttrMCPSessionID       = "mcp.session.id"
	AttrMCPProtocolVersion = "mcp.protocol.version"
	AttrJSONRPCRequestID   = "jsonrpc.request.id"
	AttrRPCResponseStatus  = "rpc.response.status_code"
	ErrorTypeToolError     = "tool_error" // a CallToolResult with isError
)

// Clara's own attributes.
const (
	AttrSession         = "clara.session"          // Clara's session (a chat's also in gen_ai.conversation.id)
	AttrDecisionID      = "clara.decision.id"      // the audit record's id, as the envelope returns it
	AttrParentDecision  = "clara.decision.parent"  // the decision id of the call that made this one
	AttrDecisionLayer   = "clara.decision.layer"   // "configuration", "session", "request", "rule", ...
	AttrDecisionRule    = "clara.decision.rule"    // the rule's name, for a rule's decision
	AttrDecisionOutcome = "clara.decision.outcome" // allow, deny, ask, rewrite, shadow_deny, ...
	AttrDecisionReason  = "clara.decision.reason"
	AttrStatus          = "clara.status" // "success" or the envelope's error code
	AttrCallback        = "clara.callback.name"
	AttrEvent           = "clara.event"
	AttrRetryReason     = "clara.retry.reason"
)

// Span events.
const (
	// EventDecision is one policy layer's or one rule's decision about a
	// call, on the span of the call it decides about.
	EventDecision = "clara.decision"
)

// Metric names.
const (
	MetricToolCalls         = "clara.tool.calls"
	MetricToolDuration      = "clara.tool.duration"
	MetricDecisions         = "clara.decisions"
	MetricRetries           = "clara.http.retries"
	MetricRateLimited       = "clara.rate_limit.refusals"
	MetricAsyncRunning      = "clara.async.running"
	MetricAsyncPending      = "clara.async.pending"
	MetricCallbacksRunning  = "clara.callbacks.running"
	MetricOperationDuration = "gen_ai.client.operation.duration"
	MetricTokenUsage        = "gen_ai.client.token.usage"
	MetricMCPServerDuration = "mcp.server.operation.duration"
	MetricMCPClientDuration = "mcp.client.operation.duration"
)

// Outcomes of decisions (AttrDecisionOutcome).
const (
	OutcomeAllow = "allow"
	OutcomeDeny  = "deny"
	OutcomeAsk   = "ask"
)
