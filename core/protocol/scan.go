package protocol

import "github.com/clara-lib/clara/core/jsonx"

// The scanner lives in jsonx, the one home of Clara's hand-written JSON;
// these names keep protocol's callers as they were.

// Scanned describes a document that Scan accepted (jsonx.Scanned).
type Scanned = jsonx.Scanned

// ScanError says where and why Scan refused a document (jsonx.ScanError).
type ScanError = jsonx.ScanError

// Scan checks that data holds exactly one JSON value in valid UTF-8,
// nested at most maxDepth deep (jsonx.Scan).
func Scan(data []byte, maxDepth int) (Scanned, *ScanError) { return jsonx.Scan(data, maxDepth) }

// ScanStrict is Scan that also refuses an object with the same key twice
// (jsonx.ScanStrict).
func ScanStrict(data []byte, maxDepth int) (Scanned, *ScanError) {
	return jsonx.ScanStrict(data, maxDepth)
}
