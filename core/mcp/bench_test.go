package mcp

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clara-lib/clara/core/protocol"
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
			cs, err := client.Connect(context.Background(), &sdk.CommandTransport{Command: cmd}, &sdk.ClientSessionOptions{ProtocolVersion: LegacyProtocolVersion})
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

// BenchmarkInMemoryEcho is the same comparison without the process
// boundary (net.Pipe in one process): less noise, the servers' own cost.
func BenchmarkInMemoryEcho(b *testing.B) {
	for _, mode := range []string{"sdk", "clara"} {
		b.Run(mode, func(b *testing.B) {
			a, c := net.Pipe()
			defer a.Close()
			defer c.Close()
			ctx := context.Background()
			switch mode {
			case "clara":
				echo := testTool{info: ToolInfo{Name: "echo", InputSchema: json.RawMessage(`{"type":"object"}`)},
					run: func(_ context.Context, _ string, args []byte, _ ProgressFunc) ([]byte, *protocol.Error) {
						return append([]byte(nil), args...), nil
					}}
				srv := NewServer(newTestHost(echo), ServerOptions{})
				defer srv.Close()
				go srv.ServeStdio(ctx, a, a)
			case "sdk":
				s := sdk.NewServer(&sdk.Implementation{Name: "bare"}, nil)
				s.AddTool(&sdk.Tool{Name: "echo", InputSchema: json.RawMessage(`{"type":"object"}`)},
					func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
						return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: string(req.Params.Arguments)}},
							StructuredContent: req.Params.Arguments}, nil
					})
				if _, err := s.Connect(ctx, &sdk.IOTransport{Reader: a, Writer: a}, nil); err != nil {
					b.Fatal(err)
				}
			}
			client := sdk.NewClient(&sdk.Implementation{Name: "bench"}, &sdk.ClientOptions{Capabilities: &sdk.ClientCapabilities{}})
			cs, err := client.Connect(ctx, &sdk.IOTransport{Reader: c, Writer: c}, &sdk.ClientSessionOptions{ProtocolVersion: LegacyProtocolVersion})
			if err != nil {
				b.Fatal(err)
			}
			defer cs.Close()
			params := &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "hello"}}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := cs.CallTool(ctx, params); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
