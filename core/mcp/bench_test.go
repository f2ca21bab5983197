package mcp

import (
	"context"
	"os"
	"os/exec"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkStdioEcho is one tools/call of an echo over stdio, from the Go
// SDK's client to a child process: "clara" is core/mcp's Server over a
// Host whose echo returns its arguments; "sdk" is the SDK's bare server
// whose echo handler does nothing else. Same client, same pipes, same run.
//
//	go test ./core/mcp -run XXX -bench StdioEcho -benchtime 20000x
func BenchmarkStdioEcho(b *testing.B) {
	for _, mode := range []string{"sdk", "clara"} {
		b.Run(mode, func(b *testing.B) {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), helperEnv+"="+mode)
			cmd.Stderr = os.Stderr
			client := sdk.NewClient(&sdk.Implementation{Name: "bench"}, &sdk.ClientOptions{Capabilities: &sdk.ClientCapabilities{}})
			cs, err := client.Connect(context.Background(), &sdk.CommandTransport{Command: cmd}, &sdk.ClientSessionOptions{ProtocolVersion: ProtocolVersion})
			if err != nil {
				b.Fatal(err)
			}
			defer cs.Close()
			params := &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "hello"}}
			ctx := context.Background()
			if res, err := cs.CallTool(ctx, params); err != nil || res.IsError || text(res) != `{"message":"hello"}` {
				b.Fatalf("echo: %v %v", err, res)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, err := cs.CallTool(ctx, params); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
