package llm

import (
	"context"
	"fmt"
	"runtime"
	"testing"
)

// BenchmarkScaling_conversations is a curve of make bench's scaling
// section: the memory each stored conversation takes, for 1,000 to
// 100,000 sessions, each left by one chat with one tool call (the user's
// prompt, the model's call, the tool's answer, the model's answer), as
// Chat.Run leaves it. The store's bound is raised to n: the engine keeps
// at most 10,000 (core's maxConversations), the least recently used
// forgotten first.
func BenchmarkScaling_conversations(b *testing.B) {
	for _, n := range []int{1000, 10000, 100000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for b.Loop() {
				before := liveHeap()
				c := NewConversations(0, n)
				ctx := context.Background()
				for i := range n {
					conv, err := c.acquire(ctx, fmt.Sprintf("session-%d", i))
					if err != nil {
						b.Fatal(err)
					}
					conv.messages = append(conv.messages,
						message{Role: roleUser, Content: fmt.Sprintf("What is the weather in city %d?", i)},
						message{Role: roleAssistant, ToolCalls: []toolCall{{ID: fmt.Sprintf("call_%d", i), Name: "weather",
							Arguments: fmt.Sprintf(`{"city":"city %d"}`, i)}}},
						message{Role: roleTool, ToolCallID: fmt.Sprintf("call_%d", i), ToolName: "weather", Content: `{"celsius":21}`},
						message{Role: roleAssistant, Content: fmt.Sprintf("It is 21 °C in city %d.", i)})
					conv.turns = 2
					c.release(conv)
				}
				after := liveHeap()
				if c.Len() != n {
					b.Fatalf("%d conversations kept", c.Len())
				}
				b.ReportMetric(float64(after-before)/float64(n), "B/conversation")
				runtime.KeepAlive(c)
			}
		})
	}
}

// liveHeap is the heap's live bytes after a collection.
func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
