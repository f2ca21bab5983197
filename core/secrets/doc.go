// Package secrets keeps the secret values Clara holds out of what it
// writes. A secret is a value read from the environment to authenticate
// somewhere: a model's API key (llm.api_key_env), the headers_env values
// of HTTP tools and of [[mcp_servers]], their env_from values, the MCP
// server's token (mcp.token_env). One Redactor per engine learns each
// value when it is read (Add) and cuts it out of every text that came
// from outside (a model's answer, an HTTP body, a remote server's error
// or stderr) before that text reaches an envelope, an event or a log.
//
// A secret is found in every form a JSON text can give it: plain, written
// with escapes (\u0073k-..., \/), and, for text that arrives in pieces
// (streamed tokens), split across pieces: a Stream holds back a tail that
// may be the start of one until the next piece says. Text that is cut
// (an excerpt, a long line) is cut after it is redacted, and Head drops a
// tail that may be the start of a secret the cut left incomplete.
//
// Values shorter than MinLength are not secrets to the Redactor: cutting
// "1" or "debug" out of every answer would break answers, not protect a
// credential.
//
// It imports nothing of Clara and starts no goroutine; a Redactor is safe
// for concurrent use, and a nil *Redactor redacts nothing.
package secrets
