// Package llmtest is a scripted model provider for tests, as
// net/http/httptest is a scripted HTTP server: it speaks OpenAI's chat
// completions, Anthropic's Messages API and Google's Gemini API
// (generateContent, streamGenerateContent?alt=sse) on loopback, from scripts that
// read like transcripts, and checks what it receives. Go tests use it
// directly; tests/llmserver wraps it in a program that C, Python and
// CLIPS tests start.
//
// # Scripts
//
// A script is a TOML file holding one conversation; its name is the file
// name without ".toml", and it answers under the URL path /NAME (so
// llm.base_url = "http://127.0.0.1:PORT/NAME"). Unknown keys are errors.
//
//	description = "OpenAI's documented function-calling example"
//	provider = "openai"        # "openai", "anthropic", "gemini", or "http" (an evaluator, an HTTP tool)
//	order = "sequence"         # or "turn": the exchange is picked by how many assistant
//	                           # messages the request holds, so conversations may run at once
//	repeat = false             # sequence: start over after the last exchange
//
//	[[exchange]]
//	name = "the model asks for the weather"
//	[exchange.expect]          # what the request must hold; every key optional
//	model = "gpt-4o-mini"
//	tools = ["get_current_weather"]    # the tools offered, in any order (no_tools = true: none)
//	last_user = "What is the weather like in Boston today?"
//	headers = { Authorization = "Bearer sk-test" }   # "*": present with any value
//	[exchange.reply]
//	json = '''
//	{ "id": "chatcmpl-abc123", "object": "chat.completion", ... }
//	'''
//
//	[[exchange]]
//	name = "the model reads the tool's answer"
//	[exchange.expect]
//	tool_results = [{ id = "call_abc123", contains = "72" }]
//	stream = true
//	[exchange.reply]
//	chunk = 7                  # written 7 bytes at a time, each flushed: events arrive cut
//	sse = '''
//	data: {"id":"chatcmpl-1","object":"chat.completion.chunk",...}
//
//	data: [DONE]
//
//	'''
//
// Expectations (Expect): method, path (after /NAME; the provider's path by
// default), headers, headers_absent, contains and not_contains (raw body
// substrings), and for the model providers model, stream, tools,
// no_tools, tool_choice, system (a substring), last_user, messages (a
// count), max_tokens, temperature and tool_results ([{id, content |
// contains, is_error}], the answers to the previous assistant message);
// for provider "http", json (the body, compared as JSON) and query.
//
// Replies (Reply): status (200), headers, one of json, sse and body
// (content_type), chunk and chunk_delay_ms (split writes), delay_ms (a
// slow answer; it ends early when the client leaves), drop_after (write
// that many bytes of the body, then drop the connection) and drop =
// "close" | "reset" (no answer at all).
//
// # Embeddings
//
// A script with provider "openai" may also answer POST /NAME/embeddings
// (OpenAI's embeddings format) with fixed vectors, outside its exchanges
// (a script may have only these):
//
//	[embeddings]
//	model = "emb-test"         # the model the request must name ("" any)
//	vectors = { "authentication" = [1.0, 0.0], "reset my password" = [0.9, 0.1] }
//
// A text without a vector, another model, or a body of another shape is
// refused (400) and recorded as a failure; Report.Embedded counts the
// requests, so a test can tell a cached vector from a fetched one.
//
// # What the server checks
//
// Besides a script's expectations, every OpenAI, Anthropic or Gemini
// request must be one the real API accepts (Gemini's: the path
// /v1beta/models/MODEL:generateContent, or :streamGenerateContent with
// alt=sse, names the model and whether it streams; contents of role user
// and model, each part one kind of data; functionDeclarations named as
// the API allows; as many functionResponse parts as the previous model
// turn has functionCall parts, for the same functions; toolConfig's mode;
// tool_choice reads "auto", "any" or "none"; a tool result's id is the
// call's id, or its function's name when the model gave no id): a JSON object with only the API's
// top-level keys, the required fields (model, messages; Anthropic's
// max_tokens and anthropic-version header), tools in the API's shape,
// every tool call of an assistant message answered right after it (a
// role "tool" message per tool_call_id; tool_result blocks first in the
// next user message), Anthropic's tool blocks only with tools defined.
// A request that fails a check is answered 400 with the API's error
// shape, and the failure is recorded: Err and Reports (GET
// /_llmtest/report) tell a test that Clara sent the wrong thing, or
// fewer requests than the script expects.
//
// # Goroutines
//
// The server runs on its own goroutines from NewServer to Close; every
// method is safe for concurrent use.
package llmtest
