package llm

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// No answer, however broken, panics a decoder.
func FuzzDecoders(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join(scriptDir, "*.toml"))
	for _, file := range files {
		text, _ := os.ReadFile(file)
		f.Add(text)
	}
	f.Add([]byte("data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":99999999999}]}}]}\n\n"))
	f.Add([]byte("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":3,\"delta\":{\"type\":\"input_json_delta\"}}\n\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, p := range []provider{openAI{}, anthropic{}} {
			p.decode(data)
			p.decodeStream(newSSEReader(strings.NewReader(string(data)), 1<<20), func(string) {})
		}
		parseChatArgs(data)
	})
}
