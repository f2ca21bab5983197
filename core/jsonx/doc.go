// Package jsonx is the one home of the JSON Clara reads and writes by hand,
// where encoding/json's reflection costs more than the work around it (a
// request, an envelope, a model's answer, an audit record, a Lua value).
//
// It imports nothing of Clara, so that every package can use it, rulelua
// included. It holds one set of escaping rules, AppendString's (those of
// encoding/json with HTML escaping off), and one fuzz corpus
// (testdata/fuzz/FuzzJSON) that holds the scanner, the reader and the
// writer to encoding/json on the same inputs.
//
//   - Scan, ScanStrict and Scanner check a document once, without
//     recursion (syntax, UTF-8, depth, duplicate keys), and can record the
//     members of a top-level object (the request's path); Unescape decodes
//     a string they accepted.
//   - Reader is a strict pull reader for documents a caller knows the shape
//     of (the answers of model providers); DecodeAny reads any document
//     into the values encoding/json gives an any (what rules read of a call).
//   - AppendString, AppendFloat, AppendValue and AppendCompact write.
//
// Everything is safe for concurrent use; a Reader or a Scanner belongs to
// one goroutine.
package jsonx
