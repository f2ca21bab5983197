package core_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clara-lib/clara/core"
)

// Issue 26 §2: a start-up configuration that does not load fails closed.

type refusal struct {
	Status, Error, Message string
	Details                []struct {
		File      string
		Line, Col int
		Message   string
	}
}

func refusalOf(t *testing.T, out string) refusal {
	t.Helper()
	var r refusal
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	return r
}

// TestStartup_a_broken_CLARA_CONFIG_refuses_every_call: with CLARA_CONFIG
// naming a file whose policy denies echo, a typo in a rule file made the
// library log "CLARA_CONFIG ignored" and serve echo.
func TestStartup_a_broken_CLARA_CONFIG_refuses_every_call(t *testing.T) {
	project := t.TempDir()
	good := "[rule]\nid = \"quiet\"\ntrigger = \"t\"\n[action]\ntype = \"log\"\nmessage = \"m\"\n"
	broken := "[rule]\nid = \"quiet\"\ntrigger = \"t\"\n[acton]\ntype = \"log\"\n"
	writeTree(t, project, map[string]string{
		"clara.toml":       "[policy]\ndeny = [\"echo\"]\n[rules]\npaths = [\"rules/*.toml\"]\n",
		"rules/quiet.toml": broken,
	})
	env := map[string]string{"CLARA_CONFIG": filepath.Join(project, "clara.toml")}
	var stderr syncBuffer
	e := core.FromEnvironment(func(k string) string { return env[k] }, &stderr)
	t.Cleanup(e.Close)
	expectRefused := func(what string) {
		t.Helper()
		for _, req := range []string{`{"tool":"echo","arguments":{"x":1}}`, `{"tool":"get_time"}`, `{"tool":"rules_list"}`, `{"x":1}`} {
			r := refusalOf(t, evalString(t, e, req))
			if r.Error != "invalid_config" || len(r.Details) == 0 || r.Details[0].File != filepath.Join(project, "rules", "quiet.toml") || r.Details[0].Line == 0 {
				t.Fatalf("%s: %s: %+v", what, req, r)
			}
		}
	}
	expectRefused("at the start")
	if !strings.Contains(stderr.String(), "every tool call is refused (invalid_config)") || strings.Contains(stderr.String(), "ignored") {
		t.Errorf("stderr: %s", stderr.String())
	}
	// clara_reset reads the file again: still broken, still refused.
	if r := refusalOf(t, string(e.Reset())); r.Error != "invalid_config" {
		t.Fatalf("reset while broken: %+v", r)
	}
	expectRefused("after a reset")
	// Fixed, a reset brings it in force: its policy holds.
	writeTree(t, project, map[string]string{"rules/quiet.toml": good})
	if out := string(e.Reset()); !strings.HasPrefix(out, `{"status":"success"`) {
		t.Fatalf("reset once fixed: %s", out)
	}
	if out := evalString(t, e, `{"tool":"echo","arguments":{"x":1}}`); !strings.Contains(out, `"error":"denied"`) {
		t.Fatalf("echo after the fix: %s", out)
	}
	// Broken again, a reset refuses again; a valid clara_configure ends it.
	writeTree(t, project, map[string]string{"rules/quiet.toml": broken})
	if r := refusalOf(t, string(e.Reset())); r.Error != "invalid_config" {
		t.Fatalf("reset broken again: %+v", r)
	}
	expectRefused("broken again")
	// clara_configure applies to the configuration the file had put in
	// force: while its rule file stays broken, so does the change; one
	// that leaves the rule file out ends the refusal, the file's policy
	// in force.
	if r := refusalOf(t, string(e.Configure([]byte("[limits]\ntimeout_ms = 2000\n")))); r.Error != "invalid_request" {
		t.Fatalf("configure keeping the broken file: %+v", r)
	}
	expectRefused("after a configure that failed")
	if out := string(e.Configure([]byte("[rules]\npaths = []\n"))); !strings.HasPrefix(out, `{"status":"success"`) {
		t.Fatalf("configure: %s", out)
	}
	if out := evalString(t, e, `{"tool":"echo","arguments":{"x":1}}`); !strings.Contains(out, `"error":"denied"`) {
		t.Fatalf("after a valid clara_configure: %s", out)
	}

	// A file that never loaded: clara_configure applies to the defaults.
	stderr = syncBuffer{}
	e1 := core.FromEnvironment(func(k string) string { return env[k] }, &stderr)
	t.Cleanup(e1.Close)
	if r := refusalOf(t, evalString(t, e1, `{"tool":"get_time"}`)); r.Error != "invalid_config" {
		t.Fatalf("a second start: %+v", r)
	}
	if out := string(e1.Configure([]byte("[limits]\ntimeout_ms = 2000\n"))); !strings.HasPrefix(out, `{"status":"success"`) {
		t.Fatalf("configure: %s", out)
	}
	if out := evalString(t, e1, `{"tool":"echo","arguments":{"x":1}}`); out != `{"status":"success","tool":"echo","result":{"x":1}}` {
		t.Fatalf("after a valid clara_configure: %s", out)
	}

	// The opt-out: CLARA_CONFIG_ON_ERROR=defaults runs on the defaults.
	env["CLARA_CONFIG_ON_ERROR"] = "defaults"
	stderr = syncBuffer{}
	e2 := core.FromEnvironment(func(k string) string { return env[k] }, &stderr)
	t.Cleanup(e2.Close)
	if out := evalString(t, e2, `{"tool":"echo","arguments":{"x":1}}`); out != `{"status":"success","tool":"echo","result":{"x":1}}` {
		t.Fatalf("CLARA_CONFIG_ON_ERROR=defaults: %s", out)
	}
	if !strings.Contains(stderr.String(), "CLARA_CONFIG ignored (CLARA_CONFIG_ON_ERROR=defaults)") {
		t.Errorf("stderr: %s", stderr.String())
	}
}

// TestStartup_broken_default_rule_files_refuse: the default rule files
// (.clara/rules/*.toml of the working directory) that do not load refuse
// every call too, unless ConfigOnError says defaults.
func TestStartup_broken_default_rule_files_refuse(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{".clara/rules/bad.toml": "[rule]\nid = \n"})
	t.Chdir(dir)
	e := core.New(core.Options{})
	t.Cleanup(e.Close)
	r := refusalOf(t, evalString(t, e, `{"tool":"echo"}`))
	if r.Error != "invalid_config" || e.Refusal() == nil || !strings.Contains(r.Message, "the default rules.paths") {
		t.Fatalf("%+v", r)
	}
	e2 := core.New(core.Options{ConfigOnError: core.ConfigOnErrorDefaults})
	t.Cleanup(e2.Close)
	if out := evalString(t, e2, `{"tool":"echo"}`); !strings.HasPrefix(out, `{"status":"success"`) {
		t.Fatalf("ConfigOnError defaults: %s", out)
	}
}

// A reset that ends in the refusal (the start-up file broke meanwhile)
// installs no rules: the host's rules are released with the rest, not
// kept by a configuration nothing runs (found merging issue 32's host
// rules with issue 26's refusal).
func TestStartup_a_reset_into_the_refusal_releases_the_hosts_rules(t *testing.T) {
	project := t.TempDir()
	rule := "[rule]\nid = \"quiet\"\ntrigger = \"t\"\n[action]\ntype = \"log\"\nmessage = \"m\"\n"
	writeTree(t, project, map[string]string{
		"clara.toml":       "[rules]\npaths = [\"rules/*.toml\"]\n",
		"rules/quiet.toml": rule,
	})
	env := map[string]string{"CLARA_CONFIG": filepath.Join(project, "clara.toml")}
	var stderr syncBuffer
	e := core.FromEnvironment(func(k string) string { return env[k] }, &stderr)
	t.Cleanup(e.Close)
	var h hostFuncs
	if err := e.RegisterRule([]byte(`{"id":"host","trigger":"t"}`), h.funcs(nil, func(map[string]any) ([]byte, error) { return nil, nil })); err != nil {
		t.Fatal(err)
	}
	writeTree(t, project, map[string]string{"rules/quiet.toml": strings.Replace(rule, "[action]", "[acton]", 1)})
	if r := refusalOf(t, string(e.Reset())); r.Error != "invalid_config" {
		t.Fatalf("reset while broken: %+v", r)
	}
	if n := h.released.Load(); n != 1 {
		t.Fatalf("the host's rule released %d times, want 1", n)
	}
}
