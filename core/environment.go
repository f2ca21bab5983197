package core

import (
	"io"
	"strings"

	"github.com/clara-lib/clara/core/logging"
)

// FromEnvironment builds the engine a host process gets when it loads the
// library, reading:
//
//   - CLARA_LOG: debug, info, warn, error or off: the level of messages
//     written to stderr while no log handler is set. Unset, only errors
//     are written (a bad CLARA_CONFIG, a recovered panic).
//   - CLARA_CONFIG: a configuration file (TOML or JSON) applied on top of
//     the embedded defaults; it is also what Reset returns to. A file that
//     cannot be read or is invalid (or names rule files that do not load)
//     is reported on the log, and every tool call is refused with
//     invalid_config until a valid clara_configure, or a Reset that finds
//     the file fixed.
//   - CLARA_CONFIG_ON_ERROR=defaults: such a file is ignored instead, and
//     the engine runs on the defaults (the behaviour before issue 26).
//   - CLARA_TEST_MODE=1: test mode whatever the configuration says (tools
//     with network, fs_write or exec capabilities do not run).
//   - CLARA_TEST_ALLOW=1: such tools run even in test mode.
//
// getenv is how the environment is read (libclara reads the C
// environment, so that a host's setenv after loading is seen; secrets are
// read at each use); stderr is os.Stderr.
func FromEnvironment(getenv func(string) string, stderr io.Writer) *Engine {
	min := logging.Error
	var badLevel string
	if v := getenv("CLARA_LOG"); v != "" {
		if l, ok := logging.ParseLevel(v); ok {
			min = l
		} else {
			badLevel = v
		}
	}
	sink := logging.WriterSink(stderr)
	onError := strings.ToLower(strings.TrimSpace(getenv("CLARA_CONFIG_ON_ERROR")))
	badOnError := onError != "" && onError != ConfigOnErrorDefaults && onError != "refuse"
	if badOnError {
		onError = "" // fail closed
	}
	e := New(Options{Logger: logging.New(sink, min),
		TestMode: isOn(getenv("CLARA_TEST_MODE")), TestAllow: isOn(getenv("CLARA_TEST_ALLOW")), Getenv: getenv,
		ConfigOnError: onError})
	e.defaultSink, e.defaultMin = sink, min
	if badLevel != "" {
		e.log.Logf(logging.Error, "CLARA_LOG=%q is not one of debug, info, warn, error, off; logging errors only", badLevel)
	}
	if badOnError {
		e.log.Logf(logging.Error, "CLARA_CONFIG_ON_ERROR=%q is not refuse or defaults; a start-up configuration that does not load refuses every call", onError)
	}
	if path := getenv("CLARA_CONFIG"); path != "" {
		e.start.path = path
		switch err := e.loadBaseFile(path); {
		case err == nil:
			e.log.Logf(logging.Info, "configuration loaded from %s", path)
		case e.start.onDefaults:
			e.log.Logf(logging.Error, "CLARA_CONFIG ignored (CLARA_CONFIG_ON_ERROR=defaults): %v", err)
		default:
			e.refuse(*e.base.Load(), startRefusal("CLARA_CONFIG="+path, err), nil)
		}
	}
	return e
}

// isOn reads a boolean environment variable: 1, true, yes or on.
func isOn(v string) bool {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "1", "true", "yes", "on":
		return true
	}
	return false
}

// LoadBaseFile applies a start-up configuration file as CLARA_CONFIG is
// applied: on top of the defaults, and what Reset returns to. Its problems
// are positioned in path. bin/clara reads CLARA_CONFIG with it, to refuse a
// bad file rather than run without it.
func (e *Engine) LoadBaseFile(path string) error { return e.loadBaseFile(path) }
