package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

// mcpCommand serves the configuration's tools over MCP: on stdio, for
// clients that start it (Claude Desktop, IDEs), or over Streamable HTTP
// with --listen, until SIGINT or SIGTERM.
func mcpCommand(env *environment) *cobra.Command {
	var listen string
	c := &cobra.Command{
		Use:   "mcp",
		Short: "Serve the configuration's tools over MCP (stdio, or HTTP with --listen)",
		Long: `Serve the tools of the configuration to MCP clients, under Clara's policy,
rules, limits and audit. Without --listen, on stdin and stdout, for clients
that start their servers (everything on stdout is then the protocol; the log
goes to stderr). With --listen ADDR, over Streamable HTTP at
http://ADDR/mcp until interrupted; the URL is printed on stdout.`,
		Example: `  clara --config clara.toml mcp
  clara mcp --listen 127.0.0.1:8765`,
		Args: cobra.NoArgs,
		RunE: withEngine(env, func(cmd *cobra.Command, args []string) error {
			if listen == "" {
				if err := env.engine.MCPServeStdio(os.Stdin, os.Stdout); err != nil {
					return failure("mcp: %v", err)
				}
				return nil
			}
			// Caught before the URL is out: whoever reads it may stop us at once.
			stop := make(chan os.Signal, 1)
			signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
			addr, err := env.engine.MCPListen(listen)
			if err != nil {
				return failure("mcp: %v", err)
			}
			fmt.Fprintf(env.stdout, "url http://%s/mcp\n", addr)
			<-stop
			env.engine.MCPStop()
			return nil
		}),
	}
	c.Flags().StringVar(&listen, "listen", "", "serve over Streamable HTTP at `ADDR` (host:port; loopback unless mcp.allow_remote)")
	return c
}
