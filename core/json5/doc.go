// Package json5 reads JSON5 (https://spec.json5.org), the relaxed JSON a
// person writes by hand (seed 002's option strings: unquoted keys, single
// quotes, trailing commas, comments, hexadecimal and signed numbers), and
// writes it back as strict, compact JSON for the rest of Clara.
//
// It is only ever used where a person writes JSON by hand, and only
// after strict JSON failed or at such an entry point (docs/protocol.md
// lists them): the request path of clara_evaluate never comes here. The
// reading itself is github.com/titanous/json5's; this package bounds what
// it is given (size, nesting) so that no input can exhaust the stack, and
// turns its values into JSON: numbers exactly as written (hexadecimal in
// decimal), object keys sorted, a key given twice keeping its last value
// (JSON5 leaves that open); NaN and Infinity, which JSON cannot hold,
// are refused.
//
// It imports nothing of Clara and starts no goroutine.
package json5
