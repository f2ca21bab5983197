package protocol

import (
	"strings"
	"testing"
)

// BenchmarkParse_echo is the parse of the bench's echo request (tests/bench/bench_common.h):
// the first step of every call.
func BenchmarkParse_echo(b *testing.B) {
	benchParse(b, `{"tool":"echo","arguments":{"message":"hello","n":42}}`)
}

// BenchmarkParse_tool5 is the parse of the tool rows' request (five arguments).
func BenchmarkParse_tool5(b *testing.B) {
	benchParse(b, `{"tool":"lua_echo","arguments":{"city":"Lyon","country":"FR","days":3,"units":"metric","detailed":false}}`)
}

// BenchmarkParse_longText is a request with a 2 KB string argument (a prompt, a document).
func BenchmarkParse_longText(b *testing.B) {
	benchParse(b, `{"tool":"echo","arguments":{"message":"`+strings.Repeat("The quick brown fox jumps over the lazy dog. ", 46)+`"}}`)
}

func benchParse(b *testing.B, request string) {
	data := []byte(request)
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
