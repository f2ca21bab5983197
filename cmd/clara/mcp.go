package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// runMCP serves the configuration's tools over MCP: clara mcp (stdio, for
// clients that start it: Claude Desktop, IDEs) or clara mcp --listen ADDR
// (Streamable HTTP at http://ADDR/mcp, until SIGINT or SIGTERM).
func runMCP(env *environment, args []string) int {
	listen := ""
	for i := 0; i < len(args); {
		v, n, err := flagValue(args, i, "--listen")
		if err != nil || (args[i] != "--listen" && len(args[i]) < len("--listen=")) {
			fmt.Fprintln(env.stderr, "clara: usage: clara mcp [--listen ADDR]")
			return 2
		}
		listen, i = v, i+n
	}
	if listen == "" {
		if err := env.engine.MCPServeStdio(os.Stdin, os.Stdout); err != nil {
			fmt.Fprintf(env.stderr, "clara: mcp: %v\n", err)
			return 1
		}
		return 0
	}
	addr, err := env.engine.MCPListen(listen)
	if err != nil {
		fmt.Fprintf(env.stderr, "clara: mcp: %v\n", err)
		return 1
	}
	fmt.Fprintf(env.stdout, "url http://%s/mcp\n", addr)
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	<-stop
	env.engine.MCPStop()
	return 0
}
