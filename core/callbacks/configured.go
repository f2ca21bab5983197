package callbacks

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/clara-lib/clara/core/protocol"
)

// Callbacks declared in the configuration ([[callbacks]] tables), beside
// the ones the callback_* tools store: committed with the project, like
// lefthook's file. They are active for every worker, have the id
// "config:NAME", and are changed in the configuration, not by the tools.

// configuredPrefix begins the id of a configured callback.
const configuredPrefix = "config:"

// configuredKeys are the keys of a [[callbacks]] table.
var configuredKeys = []string{"name", "description", "pattern", "run", "blocking", "timeout_secs", "success_message",
	"cwd", "one_at_a_time", "once_per_batch", "on_busy", "pass_files"}

// ParseConfigured reads the [[callbacks]] tables of a configuration (as
// TOML or JSON decode them: strings, booleans, int64 or float64 numbers,
// arrays) into definitions, checked as callback_upsert checks its
// arguments; root is the project root cwd must stay in. An error names the
// table and the key.
func ParseConfigured(tables []map[string]any, root string) ([]Definition, error) {
	out := make([]Definition, 0, len(tables))
	names := map[string]bool{}
	for i, t := range tables {
		d, err := parseConfigured(t, root)
		if err != nil {
			return nil, fmt.Errorf("callbacks[%d]: %v", i, err)
		}
		if names[d.Name] {
			return nil, fmt.Errorf("callbacks[%d]: callback %q is declared twice", i, d.Name)
		}
		names[d.Name] = true
		out = append(out, d)
	}
	return out, nil
}

func parseConfigured(t map[string]any, root string) (Definition, error) {
	known := map[string]bool{}
	for _, k := range configuredKeys {
		known[k] = true
	}
	var unknown []string
	for k := range t {
		if !known[k] {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return Definition{}, fmt.Errorf("unknown key %q (known: %s)", unknown[0], strings.Join(configuredKeys, ", "))
	}
	// The table becomes callback_upsert's arguments, checked the same way.
	a := upsertArgs{}
	str := func(k string) (*string, error) {
		v, ok := t[k]
		if !ok {
			return nil, nil
		}
		s, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("%s must be a string", k)
		}
		return &s, nil
	}
	boolean := func(k string) (*bool, error) {
		v, ok := t[k]
		if !ok {
			return nil, nil
		}
		b, ok := v.(bool)
		if !ok {
			return nil, fmt.Errorf("%s must be true or false", k)
		}
		return &b, nil
	}
	var err error
	for _, f := range []struct {
		key string
		dst **string
	}{{"name", &a.Name}, {"description", &a.Description}, {"success_message", &a.SuccessMessage}, {"cwd", &a.Cwd},
		{"on_busy", &a.OnBusy}, {"pass_files", &a.PassFiles}, {"run", &a.ScriptContent}} {
		if *f.dst, err = str(f.key); err != nil {
			return Definition{}, err
		}
	}
	for _, f := range []struct {
		key string
		dst **bool
	}{{"blocking", &a.Blocking}, {"one_at_a_time", &a.OneAtATime}, {"once_per_batch", &a.OncePerBatch}} {
		if *f.dst, err = boolean(f.key); err != nil {
			return Definition{}, err
		}
	}
	if v, ok := t["timeout_secs"]; ok {
		var n int
		switch x := v.(type) {
		case int64:
			n = int(max(min(x, 1<<30), -1))
		case float64:
			if x != float64(int64(x)) {
				return Definition{}, fmt.Errorf("timeout_secs must be a whole number of seconds")
			}
			n = int(max(min(x, 1<<30), -1))
		default:
			return Definition{}, fmt.Errorf("timeout_secs must be a number")
		}
		a.TimeoutSecs = &n
	}
	if v, ok := t["pattern"]; ok {
		if a.Pattern, err = json.Marshal(v); err != nil {
			return Definition{}, fmt.Errorf("pattern: %v", err)
		}
	}
	if a.Name == nil {
		return Definition{}, fmt.Errorf("name is missing")
	}
	if a.ScriptContent == nil || strings.TrimSpace(*a.ScriptContent) == "" {
		return Definition{}, fmt.Errorf("callback %q: run (the script, for bash) is missing", *a.Name)
	}
	if err := checkScript(*a.ScriptContent); err != nil {
		return Definition{}, fmt.Errorf("callback %q: %s", *a.Name, plainMessage(err))
	}
	d := Definition{}
	if err := applyArgs(root, &d, &a, true); err != nil {
		return Definition{}, fmt.Errorf("callback %q: %s", *a.Name, plainMessage(err))
	}
	d.ID = configuredPrefix + d.Name
	d.Configured = true
	d.run = *a.ScriptContent
	return d, nil
}

// plainMessage is an upsert error's message without its code and tool.
func plainMessage(err error) string {
	msg := err.Error()
	var pe *protocol.Error
	if errors.As(err, &pe) {
		msg = pe.Message
	}
	msg = strings.TrimPrefix(msg, "callback_upsert: ")
	return strings.Replace(msg, " to create a callback", "", 1)
}
