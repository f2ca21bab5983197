package protocol

import (
	"strings"
	"testing"
)

// BenchmarkParse_echo is the parse of the bench's echo request (tests/bench/bench_common.h):
// the first step of every call.
func BenchmarkParse_echo(b *testing.B) {
	data := []byte(`{"tool":"echo","arguments":{"message":"hello","n":42}}`)
	var scratch []byte
	b.ReportAllocs()
	for b.Loop() {
		var err *Error
		if _, scratch, err = Parse(data, Limits{}, scratch); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParse_tool5 is the parse of the tool rows' request (five arguments).
func BenchmarkParse_tool5(b *testing.B) {
	data := []byte(`{"tool":"lua_echo","arguments":{"city":"Lyon","country":"FR","days":3,"units":"metric","detailed":false}}`)
	var scratch []byte
	b.ReportAllocs()
	for b.Loop() {
		var err *Error
		if _, scratch, err = Parse(data, Limits{}, scratch); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParse_longText is a request with a 2 KB string argument (a prompt, a document).
func BenchmarkParse_longText(b *testing.B) {
	data := []byte(`{"tool":"echo","arguments":{"message":"` + strings.Repeat("The quick brown fox jumps over the lazy dog. ", 46) + `"}}`)
	var scratch []byte
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		var err *Error
		if _, scratch, err = Parse(data, Limits{}, scratch); err != nil {
			b.Fatal(err)
		}
	}
}
