// Command clara is Clara from the shell: ask the configured model, call a
// tool, list the tools, test rules. It is a plain Go program over core (no
// cgo), reading the same configuration as the library: the embedded
// defaults, then CLARA_CONFIG, then --config.
//
//	clara chat "What time is it?" [--allow-tools] [--max-tool-calls N] [--tools a,b] [--session S] [--verbose] [--stream] [--ask] [--result-schema JSON]
//	clara call TOOL ['{"key":"value"}'] [--session S]
//	clara tools [--format clara|openai|anthropic|mcp]
//	clara rules test [FILE...]
//	clara mcp [--listen ADDR]
//	clara version
//
// Exit status: 0 on success, 1 when the call answered an error (its
// envelope is printed), 2 for a mistake on the command line.
package main

import (
	"fmt"
	"io"
	"os"
	"time"
)

// command is one subcommand: it gets the arguments after its name and
// returns the exit status.
type command struct {
	name, usage string
	run         func(env *environment, args []string) int
}

var commands = []command{
	{"chat", `chat PROMPT [--allow-tools] [--max-tool-calls N] [--tools a,b] [--session S] [--model M] [--verbose] [--stream] [--ask] [--result-schema JSON]`, runChat},
	{"call", `call TOOL ['{"key":"value"}'] [--session S]`, runCall},
	{"tools", `tools [--format clara|openai|anthropic|mcp]`, runTools},
	{"rules", `rules test [FILE...]`, runRules},
	{"mcp", `mcp [--listen ADDR]`, runMCP},
	{"version", `version`, runVersion},
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// stdin is where chat --ask reads the user's answers (tests replace it).
var stdin io.Reader = os.Stdin

func run(args []string, stdout, stderr io.Writer) int {
	env := &environment{stdout: stdout, stderr: stderr, stdin: stdin}
	args, err := env.globalFlags(args)
	if err != nil {
		fmt.Fprintf(stderr, "clara: %v\n", err)
		return 2
	}
	if len(args) == 0 || args[0] == "help" || args[0] == "--help" || args[0] == "-h" {
		usage(stdout)
		return 0
	}
	for _, c := range commands {
		if c.name == args[0] {
			if err := env.start(); err != nil {
				fmt.Fprintf(stderr, "clara: %v\n", err)
				return 2
			}
			rc := c.run(env, args[1:])
			// What telemetry still holds goes out before the process does.
			_ = env.engine.FlushTelemetry(2 * time.Second)
			return rc
		}
	}
	fmt.Fprintf(stderr, "clara: unknown command %q (clara help lists them)\n", args[0])
	return 2
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: clara [--config FILE] COMMAND ...")
	for _, c := range commands {
		fmt.Fprintln(w, "  clara "+c.usage)
	}
	fmt.Fprintln(w, "The configuration: the defaults, then CLARA_CONFIG, then --config (TOML or JSON).")
}
