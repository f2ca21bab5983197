// Package llm is Clara's outbound side: the one HTTP client every request
// to the network goes through, the HTTP tools built on it (the evaluator
// of SPEC §10.1, [[tools]] with http = {...}), and the chat tool's loop
// with tool calling against an OpenAI-compatible or Anthropic model
// (SPEC §10.2, issue 11).
//
// # What is here
//
//   - Client: keep-alive pooling, a per-call timeout, a response-size cap,
//     retries of 429/502/503/504 and dropped connections with backoff that
//     honours Retry-After, the host allowlist (checked on the URL before
//     any connection and again on every address dialled), and secrets
//     read from the environment, learnt by its secrets.Redactor and kept
//     out of every error, log line, answer and body excerpt.
//   - Transport: the same path (allowlist, dial check, response cap) for
//     another protocol's client: the MCP SDK's, for servers reached by
//     URL.
//   - HTTPToolFunc: a toolbox.Func that is one HTTP request.
//   - Chat: the loop. It sends the tool catalog in the provider's format,
//     runs the model's tool calls through a Host, answers the model with
//     results or seed 002's error objects, fires turn events, hands rules'
//     notices to the model, streams, and keeps conversations per session
//     (Conversations). Every secret is cut out of what the model sends
//     back after it is decoded: content, tool calls, streamed tokens
//     (secrets.Stream), errors.
//     With a result_schema, the model also gets the loop's own tools
//     set_result and finish (owntools.go), which never reach the Host.
//
// # What it may import
//
// The standard library, core/protocol, core/toolbox, core/logging and
// core/secrets;
// never the engine (core) nor core/rules. Everything the loop needs of the
// engine comes through Host, which the engine implements.
//
// # Goroutines
//
// Client, Chat and Conversations are safe for concurrent use. A chat runs
// on its caller's goroutine, plus one goroutine per tool call of a model
// message (each recovers its panics into an internal error); it returns
// only after every goroutine it started has ended. The Client's transport
// keeps idle connections, closed by Client.Close or by a Configure; a
// Transport's, by its CloseIdleConnections (the MCP Manager's Close).
// Host's contract is on its declaration.
package llm
