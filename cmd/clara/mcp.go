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
http://ADDR/mcp until interrupted; the URL is printed on stdout. SIGHUP
reopens the audit file (audit.path) after logrotate moved it.`,
		Example: `  clara --config clara.toml mcp
  clara mcp --listen 127.0.0.1:8765`,
		Args: cobra.NoArgs,
		RunE: withEngine(env, func(cmd *cobra.Command, args []string) error {
			defer reopenAuditOnHangup(env)()
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

// reopenAuditOnHangup makes SIGHUP reopen the audit file while the server
// runs, as daemons do for logrotate's postrotate; it returns the function
// that stops listening for it. A failure to reopen is logged: the records
// keep going where they went.
func reopenAuditOnHangup(env *environment) (stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		defer func() {
			if v := recover(); v != nil {
				fmt.Fprintf(env.stderr, "clara: SIGHUP: %v\n", v)
			}
		}()
		for {
			select {
			case <-hup:
				if err := env.engine.ReopenAudit(); err != nil {
					fmt.Fprintf(env.stderr, "clara: SIGHUP: the audit was not reopened: %v\n", err)
				}
			case <-done:
				return
			}
		}
	}()
	return func() {
		signal.Stop(hup)
		close(done)
	}
}
