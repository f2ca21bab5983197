package core_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clara-lib/clara/core"
	"github.com/clara-lib/clara/core/mcp"
	"github.com/clara-lib/clara/core/pgstore/pgtest"
)

// mcpChildEnv makes the test binary an MCP server on its stdin and stdout
// (BenchmarkMCP_stdioEcho): "clara" the engine with its built-in tools,
// "sdk" the Go SDK's bare server whose echo does nothing else.
const mcpChildEnv = "CLARA_CORE_TEST_MCP_CHILD"

func TestMain(m *testing.M) {
	if mode := os.Getenv(mcpChildEnv); mode != "" {
		os.Exit(serveMCPChild(mode))
	}
	code := m.Run()
	pgtest.Stop() // the PostgreSQL of the shared store's tests, if one started
	os.Exit(code)
}

func serveMCPChild(mode string) int {
	switch mode {
	case "clara":
		e := core.New(core.Options{})
		if err := e.MCPServeStdio(os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return 0
	case "sdk":
		s := sdk.NewServer(&sdk.Implementation{Name: "bare"}, nil)
		s.AddTool(&sdk.Tool{Name: "echo", InputSchema: json.RawMessage(`{"type":"object"}`)},
			func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
				return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: string(req.Params.Arguments)}},
					StructuredContent: req.Params.Arguments}, nil
			})
		if err := s.Run(context.Background(), &sdk.StdioTransport{}); err != nil && !errors.Is(err, io.EOF) {
			return 1
		}
		return 0
	}
	fmt.Fprintf(os.Stderr, "%s=%q: unknown mode\n", mcpChildEnv, mode)
	return 2
}

// BenchmarkMCP_stdioEcho is one tools/call of echo over stdio from the Go
// SDK's client to a child process: "clara" is the engine serving its
// built-in echo through the whole pipeline (policy, rules, validation,
// limits, audit); "sdk" is the SDK's bare server. Same client, same pipes,
// same run (issue 13's bench row: Clara at most 1.3 times the bare server).
//
//	go test ./core -run XXX -bench MCP_stdioEcho
func BenchmarkMCP_stdioEcho(b *testing.B) {
	for _, mode := range []string{"sdk", "clara"} {
		b.Run(mode, func(b *testing.B) {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), mcpChildEnv+"="+mode, "CLARA_CONFIG=", "CLARA_LOG=")
			cmd.Stderr = os.Stderr
			client := sdk.NewClient(&sdk.Implementation{Name: "bench"}, &sdk.ClientOptions{Capabilities: &sdk.ClientCapabilities{}})
			cs, err := client.Connect(context.Background(), &sdk.CommandTransport{Command: cmd},
				&sdk.ClientSessionOptions{ProtocolVersion: mcp.LegacyProtocolVersion})
			if err != nil {
				b.Fatal(err)
			}
			defer cs.Close()
			params := &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "hello"}}
			ctx := context.Background()
			res, err := cs.CallTool(ctx, params)
			if err != nil || res.IsError || resultText(res) != `{"message":"hello"}` {
				b.Fatalf("echo: %v %+v", err, res)
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
