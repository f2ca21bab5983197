package protocol

import "fmt"

// Code is an error code of the protocol: the `error` field of an error
// envelope. The set is closed; programs switch on it.
type Code string

// The error codes of SPEC §2, in the order of its table.
const (
	InvalidJSON    Code = "invalid_json"     // not JSON, not an object, invalid UTF-8, NULL or empty
	InvalidRequest Code = "invalid_request"  // a known field has the wrong type, or a request limit is exceeded
	UnknownTool    Code = "unknown_tool"     // no tool of that name
	InvalidArgs    Code = "invalid_args"     // arguments violate the tool's input_schema
	Denied         Code = "denied"           // policy or a rule refused the call
	RateLimited    Code = "rate_limited"     // the tool's rate_per_min is spent
	Timeout        Code = "timeout"          // the tool ran past its timeout_ms
	OutputTooLarge Code = "output_too_large" // a JSON result larger than max_output_bytes
	ToolFailed     Code = "tool_failed"      // the tool reported an error
	Internal       Code = "internal"         // a panic or a bug; the message is redacted

	// Issue 28: a budget of calls per tool is spent (max_calls_per_chat,
	// max_calls_per_session); a rule blocked what a tool or a chat gave
	// back.
	BudgetExhausted Code = "budget_exhausted"
	Blocked         Code = "blocked"

	// Issue 31: the call needs the shared store (store.backend =
	// "postgres"), which could not be reached in time; details name it.
	Unavailable Code = "unavailable"
)

// Error is a failure that knows its protocol code. Message is for people;
// Details, when set, is a raw JSON value for programs. Cause is kept for the
// log and never reaches the envelope.
type Error struct {
	Code    Code
	Message string
	Details []byte
	Cause   error
}

func (e *Error) Error() string { return string(e.Code) + ": " + e.Message }

// Unwrap returns the cause, so errors.Is and errors.As see through an Error.
func (e *Error) Unwrap() error { return e.Cause }

// Errorf builds an Error with a formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// InternalError is the error every recovered panic or bug becomes: its
// message is redacted, and cause (the panic value, the stack) goes to the log.
func InternalError(cause error) *Error {
	return &Error{Code: Internal, Message: "internal error", Cause: cause}
}
