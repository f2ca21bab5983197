package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/clara-lib/clara/core"
	"github.com/clara-lib/clara/core/fsread"
	"github.com/clara-lib/clara/core/protocol"
)

// environment is what every command shares: the global flags, the engine
// (built from the environment and --config by the commands that call
// tools), and the streams.
type environment struct {
	engine         *core.Engine
	configPath     string // --config
	json           bool   // --json
	stdout, stderr io.Writer
	stdin          io.Reader // chat --ask reads answers here
	// configTrouble: the command failed on its configuration, whose
	// problems are printed; --help would not help.
	configTrouble bool
}

// start builds the engine: defaults, CLARA_CONFIG, then --config. A file
// that cannot be read or has a problem stops the command (exit 2) with
// every problem listed, where the library would log it and go on.
func (env *environment) start() error {
	base := os.Getenv("CLARA_CONFIG")
	env.engine = core.FromEnvironment(func(name string) string {
		if name == "CLARA_CONFIG" {
			return "" // applied below, where a bad file stops the command
		}
		return os.Getenv(name)
	}, env.stderr)
	if base != "" {
		if err := env.engine.LoadBaseFile(base); err != nil {
			return env.configError("CLARA_CONFIG="+base, base, err)
		}
	}
	if env.configPath != "" {
		if err := env.engine.ConfigureFile(env.configPath); err != nil {
			return env.configError("--config", env.configPath, err)
		}
	}
	if perr := env.engine.Refusal(); perr != nil {
		// The default rule files do not load: the library would refuse
		// every call; the command stops at once and says why.
		return env.configError("the default rule files", "", perr.Cause)
	}
	return nil
}

// configError reports a configuration file that failed to apply: its
// problems as `clara check` finds them (each at its file and line), else
// err.
func (env *environment) configError(what, path string, err error) error {
	env.configTrouble = true
	var ps protocol.Problems
	if !errors.As(err, &ps) && path != "" {
		if text, rerr := readConfigFile(path); rerr == nil {
			ps = core.CheckFile(text, path)
		}
	}
	if len(ps) == 0 {
		return usageError("%s: %v", what, err)
	}
	fmt.Fprintf(env.stderr, "clara: %s: the configuration has %s:\n", what, plural(len(ps), "problem"))
	for _, p := range relativeProblems(ps) {
		fmt.Fprintf(env.stderr, "  %s\n", p)
	}
	return &exitError{code: exitUsage}
}

// readConfigFile reads a configuration file the command names: a regular
// file of at most core.MaxConfigFile bytes (a named pipe or /dev/zero is
// refused at once, never waited on or read without end).
func readConfigFile(path string) ([]byte, error) {
	return fsread.File(path, core.MaxConfigFile)
}

// envelope is an answer of the engine, decoded.
type envelope struct {
	Status  string            `json:"status"`
	Tool    string            `json:"tool"`
	Result  json.RawMessage   `json:"result"`
	Error   string            `json:"error"`
	Message string            `json:"message"`
	Details json.RawMessage   `json:"details"`
	Notices []protocol.Notice `json:"notices"`
	Trace   []traceEntry      `json:"trace"`
}

// call evaluates a request and returns its envelope, decoded and raw.
func (env *environment) call(request any) (envelope, []byte) {
	req, err := json.Marshal(request)
	if err != nil {
		panic(err) // requests are built here from strings, maps and raw JSON checked to be valid
	}
	raw := env.engine.Evaluate(req)
	var out envelope
	if err := json.Unmarshal(raw, &out); err != nil {
		out = envelope{Status: "error", Error: "internal", Message: "the envelope does not decode: " + err.Error()}
	}
	return out, raw
}

// finish prints what a call answered: with --json the whole envelope on
// stdout; else the notices (and the trace) on stderr and, on success, what
// result prints on stdout. An error envelope's message goes to stderr and
// the command exits 1.
func (env *environment) finish(out envelope, raw []byte, result func(envelope)) error {
	if env.json {
		fmt.Fprintln(env.stdout, string(raw))
	} else {
		for _, n := range out.Notices {
			from := n.Rule
			if from == "" {
				from = n.Callback
			}
			fmt.Fprintf(env.stderr, "notice (%s, %s): %s\n", n.Priority, from, n.Message)
		}
	}
	if out.Status != "success" {
		return failure("%s: %s", out.Error, out.Message)
	}
	if !env.json {
		result(out)
	}
	return nil
}

// plural is "1 thing" or "n things".
func plural(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}

// relative is path relative to the working directory when it lies under
// it (the engine names the rule files it read by their absolute paths).
func relative(path string) string {
	if !filepath.IsAbs(path) {
		return path
	}
	wd, err := os.Getwd()
	if err != nil {
		return path
	}
	if rel, err := filepath.Rel(wd, path); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
		return rel
	}
	return path
}

// relativeProblems is ps with their files relative.
func relativeProblems(ps protocol.Problems) protocol.Problems {
	out := make(protocol.Problems, len(ps))
	for i, p := range ps {
		p.File = relative(p.File)
		out[i] = p
	}
	return out
}
