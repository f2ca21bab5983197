// Package protocol reads Clara requests and writes Clara responses.
//
// It is the leaf of the core: it imports nothing else from Clara. The
// request side checks a byte slice once (syntax, UTF-8, nesting depth) with
// an iterative scanner, then picks the known fields out with gjson without
// unmarshalling the document. The response side appends compact envelopes,
// `status` first, to a caller's buffer, so the hot path allocates nothing of
// its own.
//
// Everything here is safe for concurrent use; nothing keeps state between
// calls. Values returned by Parse point into the caller's request bytes and
// are valid only while those bytes are.
package protocol
