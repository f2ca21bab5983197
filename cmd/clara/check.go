package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/clara-lib/clara/core"
	"github.com/clara-lib/clara/core/protocol"
)

func checkCommand(env *environment) *cobra.Command {
	return &cobra.Command{
		Use:   "check",
		Short: "Check a configuration and everything it names, without running anything",
		Long: `Check a configuration: the file --config names, else the one CLARA_CONFIG
names, else the defaults alone. Everything it names is read and compiled as
a configuration change would: rule files, plugins, Lua conditions, scripts
and tools, HTTP tools, callbacks, the model's settings, [[mcp_servers]]
entries and the audit path. Nothing runs: no MCP server is started, no
embedding fetched, no script run, no file written.

Every problem is printed as FILE:LINE:COL: MESSAGE (--json: a JSON object
with the list). Exit status 1 when there are problems.`,
		Example: `  clara check --config clara.toml
  CLARA_CONFIG=clara.toml clara check
  clara check --config clara.toml --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			path, what := env.configPath, "--config"
			if path == "" {
				path, what = os.Getenv("CLARA_CONFIG"), "CLARA_CONFIG"
			}
			var text []byte
			source := "the defaults"
			if path != "" {
				var err error
				if text, err = readConfigFile(path); err != nil {
					return usageError("%s: %v", what, err)
				}
				source = path
			}
			var found protocol.Problems
			if path != "" {
				found = core.CheckFile(text, path)
			} else {
				found = core.Check(text, source)
			}
			problems := relativeProblems(found)
			if env.json {
				out, _ := json.MarshalIndent(struct {
					Source   string            `json:"source"`
					Problems protocol.Problems `json:"problems"`
				}{source, problems}, "", "  ")
				fmt.Fprintln(env.stdout, string(out))
			} else {
				for _, p := range problems {
					fmt.Fprintln(env.stdout, p)
				}
			}
			if len(problems) > 0 {
				return failure("%s: %s", source, plural(len(problems), "problem"))
			}
			if !env.json {
				fmt.Fprintf(env.stdout, "%s: no problems\n", source)
			}
			return nil
		},
	}
}
