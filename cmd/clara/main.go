// Command clara is Clara from the shell: ask the configured model, call a
// tool, list the tools, check a configuration, test rules, read the
// audit, serve MCP. It is a plain Go program over core (no cgo), reading
// the same configuration as the library: the embedded defaults, then
// CLARA_CONFIG, then --config. The command line is parsed by cobra
// (github.com/spf13/cobra), which gives every command its --help, exact
// flag names in any order, and shell completion; docs/cli.md is the manual.
//
// Results go to stdout and diagnostics to stderr; --json prints the whole
// envelope (or the command's JSON report) instead of the result. Exit
// status: 0 success, 1 the call answered an error (the tool, the model or
// the policy failed it), a rule test failed or a check found problems, 2
// the command line or the configuration is wrong.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/clara-lib/clara/core"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// Exit statuses.
const (
	exitOK     = 0
	exitFailed = 1 // the call answered an error, a test failed, a check found problems
	exitUsage  = 2 // the command line or the configuration is wrong
)

// exitError ends a command with a status; msg (when not "") goes to
// stderr as "clara: msg".
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// usageError is a mistake on the command line or in the configuration.
func usageError(format string, args ...any) error {
	return &exitError{code: exitUsage, msg: fmt.Sprintf(format, args...)}
}

// failure is a call, a test or a check that failed; its message (if any)
// has been printed already when msg is "".
func failure(format string, args ...any) error {
	return &exitError{code: exitFailed, msg: fmt.Sprintf(format, args...)}
}

// run parses args, runs the command and returns the exit status.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	env := &environment{stdin: stdin, stdout: stdout, stderr: stderr}
	root := newRoot(env)
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteC()
	if env.engine != nil {
		env.engine.Close()
		// What telemetry still holds goes out before the process does.
		_ = env.engine.FlushTelemetry(2 * time.Second)
	}
	if err == nil {
		return exitOK
	}
	var ee *exitError
	if !errors.As(err, &ee) {
		// cobra's own: an unknown command or flag, a wrong number of
		// arguments.
		ee = &exitError{code: exitUsage, msg: err.Error()}
	}
	if ee.msg != "" {
		fmt.Fprintf(stderr, "clara: %s\n", ee.msg)
	}
	if ee.code == exitUsage && cmd != nil && !env.configTrouble {
		fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
	}
	return ee.code
}

// newRoot builds the command tree.
func newRoot(env *environment) *cobra.Command {
	root := &cobra.Command{
		Use:   "clara",
		Short: "Clara from the shell: chat with the model, call tools, check configurations, test rules",
		Long: `Clara from the shell: ask the configured model, call a tool, list the tools,
check a configuration, test rules, read the audit, serve MCP.

The configuration is the embedded defaults, then the file CLARA_CONFIG
names, then --config (TOML or JSON). Results go to stdout, diagnostics to
stderr. Exit status: 0 success; 1 the call answered an error (the tool,
the model or the policy failed it), a rule test failed or a check found
problems; 2 the command line or the configuration is wrong.`,
		Example: `  clara call math_eval '{"expression":"6*7"}'
  clara --config clara.toml chat "What time is it?" --allow-tools
  clara check --config clara.toml
  clara rules test --coverage`,
		Version:       core.Version,
		SilenceErrors: true,
		SilenceUsage:  true,
		// Without a command: the usage, on stderr, as a mistake.
		RunE: func(cmd *cobra.Command, args []string) error {
			cmd.SetOut(env.stderr)
			_ = cmd.Usage()
			return &exitError{code: exitUsage, msg: "a command is needed"}
		},
	}
	root.SetVersionTemplate("clara {{.Version}}\n")
	root.PersistentFlags().StringVar(&env.configPath, "config", "", "a configuration `FILE` (TOML or JSON) applied over the defaults and CLARA_CONFIG")
	root.PersistentFlags().BoolVar(&env.json, "json", false, "print the whole envelope (or the command's JSON report) instead of the result")
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error { return usageError("%v", err) })
	root.AddCommand(chatCommand(env), callCommand(env), toolsCommand(env), checkCommand(env),
		rulesCommand(env), auditCommand(env), mcpCommand(env), versionCommand(env))
	return root
}

// groupCommand is a command that only holds subcommands: without one, or
// with an unknown one, it is a mistake.
func groupCommand(use, short string, subs ...*cobra.Command) *cobra.Command {
	c := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageError("%s needs a command: %s", cmd.CommandPath(), strings.Join(names(cmd.Commands()), ", "))
			}
			return usageError("unknown command %q for %q", args[0], cmd.CommandPath())
		},
	}
	c.AddCommand(subs...)
	return c
}

func names(cmds []*cobra.Command) []string {
	var out []string
	for _, c := range cmds {
		out = append(out, c.Name())
	}
	return out
}
