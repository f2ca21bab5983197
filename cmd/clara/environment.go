package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/clara-lib/clara/core"
	"github.com/clara-lib/clara/core/fsread"
)

// environment is what every command shares: the engine, built from the
// environment and --config, and the streams.
type environment struct {
	engine         *core.Engine
	configPath     string
	stdout, stderr io.Writer
	stdin          io.Reader // chat --ask reads answers here
}

// globalFlags takes --config FILE (anywhere before the command's own
// arguments) and returns the rest.
func (env *environment) globalFlags(args []string) ([]string, error) {
	var rest []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--config":
			if i+1 >= len(args) {
				return nil, errors.New("--config needs a file")
			}
			env.configPath = args[i+1]
			i++
		case strings.HasPrefix(a, "--config="):
			env.configPath = strings.TrimPrefix(a, "--config=")
		default:
			rest = append(rest, a)
		}
	}
	return rest, nil
}

// start builds the engine: defaults, CLARA_CONFIG, then --config.
func (env *environment) start() error {
	env.engine = core.FromEnvironment(os.Getenv, env.stderr)
	if env.configPath == "" {
		return nil
	}
	text, err := fsread.File(env.configPath, core.MaxConfigFile)
	if err != nil {
		return err
	}
	answer := env.engine.Configure(text)
	var out struct {
		Status, Message string
	}
	if json.Unmarshal(answer, &out) != nil || out.Status != "success" {
		return fmt.Errorf("--config %s: %s", env.configPath, out.Message)
	}
	return nil
}

// call evaluates a request and returns its envelope, decoded.
func (env *environment) call(request any) (map[string]any, []byte) {
	req, err := json.Marshal(request)
	if err != nil {
		panic(err) // requests are built here from strings and maps
	}
	raw := env.engine.Evaluate(req)
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return out, raw
}

// failed prints an error envelope's message and returns 1.
func (env *environment) failed(envelope map[string]any, raw []byte) int {
	if msg, ok := envelope["message"].(string); ok {
		fmt.Fprintf(env.stderr, "clara: %v: %s\n", envelope["error"], msg)
	}
	fmt.Fprintln(env.stdout, string(raw))
	return 1
}

// flagValue reads the value of a flag at args[i] ("--name value" or
// "--name=value"), and how many arguments it took.
func flagValue(args []string, i int, name string) (string, int, error) {
	if v, ok := strings.CutPrefix(args[i], name+"="); ok {
		return v, 1, nil
	}
	if i+1 >= len(args) {
		return "", 0, fmt.Errorf("%s needs a value", name)
	}
	return args[i+1], 2, nil
}
