package core_test

// Issue 25, findings 2 and 14: every file Clara reads is read one way
// (core/fsread: regular files only, a non-blocking open, a bound), and
// every file a rule or a plugin names stays inside its root.

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/clara-lib/clara/core"
	"github.com/clara-lib/clara/core/logging"
)

// mkfifo makes a named pipe. A reader that opens it the ordinary way
// waits for a writer for ever.
func mkfifo(t *testing.T, path string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	// Should a read hang (the bug), a writer opened for a moment lets it
	// end, so that the test can report it and the engine close.
	t.Cleanup(func() {
		if f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	})
	return path
}

// quickly runs f, failing the test when it takes more than ten seconds.
func quickly(t *testing.T, what string, f func() string) string {
	t.Helper()
	done := make(chan string, 1)
	go func() { done <- f() }()
	select {
	case out := <-done:
		return out
	case <-time.After(10 * time.Second):
		t.Fatalf("%s hangs", what)
		return ""
	}
}

func scriptRule(script string) string {
	return "[rule]\nid = \"scripted\"\ntrigger = \"visit\"\n[condition]\nscript = " + jsonText(script) + "\n[action]\ntype = \"notify_self\"\nmessage = \"m\"\n"
}

// TestIssue25_scripts_are_read_as_regular_files: a rule condition's
// script naming a named pipe hung every load for ever, and /dev/zero grew
// without bound (os.Stat said 0 bytes, os.ReadFile read on): rules_load,
// clara_configure, a plugin's rule file and hot reload.
func TestIssue25_scripts_are_read_as_regular_files(t *testing.T) {
	dir := t.TempDir()
	mkfifo(t, filepath.Join(dir, "rules", "pipe.lua"))
	mkfifo(t, filepath.Join(dir, "plugins", "p", "scripts", "pipe.lua"))
	if err := os.Symlink("/dev/zero", filepath.Join(dir, "rules", "zero.lua")); err != nil {
		t.Fatal(err)
	}
	writeTree(t, dir, map[string]string{
		"fifo.toml":                scriptRule("rules/pipe.lua"),
		"zero.toml":                scriptRule("/dev/zero"),
		"zerolink.toml":            scriptRule("rules/zero.lua"),
		"plugins/p/plugin.toml":    "name = \"p\"\n",
		"plugins/p/rules/ok.toml":  greetRule("plugin"),
		"plugins/p/scripts/ok.lua": "return true\n",
	})
	e := rulesEngine(t, "project_root = "+jsonText(dir)+"\n[rules]\nbuiltin = false\n")
	pipe := filepath.Join(dir, "rules", "pipe.lua")
	for _, c := range []struct{ what, req, want string }{
		{"rules_load of inline rules naming a named pipe",
			`{"tool":"rules_load","arguments":{"name":"x.toml","toml":` + jsonText(scriptRule("rules/pipe.lua")) + `}}`,
			pipe + ` is a named pipe, not a regular file`},
		{"rules_load of a file naming a named pipe",
			`{"tool":"rules_load","arguments":{"paths":["fifo.toml"]}}`, pipe + ` is a named pipe, not a regular file`},
		{"rules_load of inline rules naming /dev/zero",
			`{"tool":"rules_load","arguments":{"name":"x.toml","toml":` + jsonText(scriptRule("/dev/zero")) + `}}`,
			`/dev/zero is outside ` + dir},
		{"rules_load of a file naming /dev/zero",
			`{"tool":"rules_load","arguments":{"paths":["zero.toml"]}}`, `/dev/zero is outside ` + dir},
		{"rules_load of a file naming a link to /dev/zero",
			`{"tool":"rules_load","arguments":{"paths":["zerolink.toml"]}}`,
			filepath.Join(dir, "rules", "zero.lua") + ` leads outside ` + dir + ` through a symbolic link`},
	} {
		out := quickly(t, c.what, func() string { return evalString(t, e, c.req) })
		if !strings.Contains(out, `"error":"invalid_args"`) || !strings.Contains(out, "script: "+c.want) {
			t.Errorf("%s: %s", c.what, out)
		}
	}
	// clara_configure: rule files of rules.paths, a plugin's rule file.
	for _, c := range []struct{ what, cfg, want string }{
		{"rules.paths naming a named pipe", `{"rules":{"paths":["fifo.toml"]}}`, pipe + ` is a named pipe`},
		{"rules.paths naming /dev/zero", `{"rules":{"paths":["zero.toml"]}}`, `/dev/zero is outside`},
	} {
		out := quickly(t, c.what, func() string { return string(e.Configure([]byte(c.cfg))) })
		if !strings.Contains(out, `"error":"invalid_request"`) || !strings.Contains(out, c.want) {
			t.Errorf("%s: %s", c.what, out)
		}
	}
	for _, script := range []string{"scripts/pipe.lua", "/dev/zero"} {
		writeTree(t, dir, map[string]string{"plugins/p/rules/bad.toml": scriptRule(script)})
		out := quickly(t, "a plugin's rule naming "+script, func() string { return string(e.Configure([]byte(`{"plugins":{"paths":["plugins/*"]}}`))) })
		if !strings.Contains(out, `"error":"invalid_request"`) || !strings.Contains(out, "bad.toml") ||
			!(strings.Contains(out, "is a named pipe, not a regular file") || strings.Contains(out, "/dev/zero is outside "+filepath.Join(dir, "plugins", "p"))) {
			t.Errorf("a plugin's rule naming %s: %s", script, out)
		}
	}
	if err := os.Remove(filepath.Join(dir, "plugins", "p", "rules", "bad.toml")); err != nil {
		t.Fatal(err)
	}
}

// TestIssue25_hot_reload_of_a_script_that_is_no_file: a rule file edited
// to name a named pipe or /dev/zero stalled the watcher for ever (and
// every reload after it); now the reload fails, says why, and the rules
// in force stay.
func TestIssue25_hot_reload_of_a_script_that_is_no_file(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{".clara/rules/greet.toml": greetRule("v1")})
	var buf syncBuffer
	e := core.New(core.Options{Logger: logging.New(func(l logging.Level, m string) { buf.Write([]byte(l.String() + " " + m + "\n")) }, logging.Debug)})
	t.Cleanup(e.Close)
	pipe := mkfifo(t, filepath.Join(dir, ".clara", "rules", "pipe.lua")) // unblocked before the engine closes
	mustConfigure(t, e, "project_root = "+jsonText(dir)+"\nstate_dir = "+jsonText(filepath.Join(dir, ".clara"))+"\n[rules]\nbuiltin = false\n")
	visit := func() string { return strings.Join(notices(t, emitString(t, e, `{"event":"visit"}`)), " | ") }
	expectEq(t, "before the edit", visit(), "v1")
	for i, c := range []struct{ script, want string }{
		{"pipe.lua", pipe + " is a named pipe, not a regular file"},
		{"/dev/zero", "/dev/zero is outside " + dir},
	} {
		saveLikeAnEditor(t, filepath.Join(dir, ".clara", "rules", "greet.toml"), scriptRule(c.script))
		deadline := time.Now().Add(10 * time.Second)
		for !strings.Contains(buf.String(), c.want) {
			if time.Now().After(deadline) {
				t.Fatalf("edit %d: no reload error naming %q in ten seconds:\n%s", i, c.want, buf.String())
			}
			time.Sleep(5 * time.Millisecond)
		}
		expectEq(t, "the rules in force stay", visit(), "v1")
	}
	// The watcher still works.
	saveLikeAnEditor(t, filepath.Join(dir, ".clara", "rules", "greet.toml"), greetRule("v2"))
	waitFor(t, "the next good edit", func() bool { return visit() == "v2" })
}

// TestIssue25_configuration_files_are_regular_files: CLARA_CONFIG and a
// configuration's absolute lua_file (the host's own, taken as given) are
// read as regular files too.
func TestIssue25_configuration_files_are_regular_files(t *testing.T) {
	fifo := mkfifo(t, filepath.Join(t.TempDir(), "config.toml"))
	for _, path := range []string{fifo, "/dev/zero"} {
		var buf syncBuffer
		quickly(t, "CLARA_CONFIG="+path, func() string {
			e := core.FromEnvironment(func(k string) string {
				if k == "CLARA_CONFIG" {
					return path
				}
				return ""
			}, &buf)
			e.Close()
			return ""
		})
		if !strings.Contains(buf.String(), path+" is a") || !strings.Contains(buf.String(), ", not a regular file") {
			t.Errorf("CLARA_CONFIG=%s: %s", path, buf.String())
		}
	}
	e := rulesEngine(t, "")
	for _, path := range []string{fifo, "/dev/zero"} {
		out := quickly(t, "lua_file = "+path, func() string {
			return string(e.Configure([]byte("[[tools]]\nname = \"t\"\nlua_file = " + jsonText(path) + "\n")))
		})
		if !strings.Contains(out, `tools[0] (t): lua_file: `+path+` is a`) {
			t.Errorf("lua_file = %s: %s", path, out)
		}
	}
}

// TestIssue25_plugins_and_rules_stay_inside_their_root: a plugin ran code
// from outside its folder and project_root: an absolute lua_file, a
// lua_file that is a symbolic link, a rule's script = "../../../x.lua".
func TestIssue25_plugins_and_rules_stay_inside_their_root(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "project")
	outside := filepath.Join(base, "outside", "x.lua")
	writeTree(t, base, map[string]string{
		"outside/x.lua":                   "return function() return 'outside' end\n",
		"project/plugins/p/plugin.toml":   "name = \"p\"\n",
		"project/plugins/p/rules/ok.toml": greetRule("plugin"),
		"project/plugins/p/scripts/t.lua": "return function() return 'inside' end\n",
		"project/shared/s.lua":            "return true\n",
	})
	plugin := filepath.Join(dir, "plugins", "p")
	if err := os.Symlink(outside, filepath.Join(plugin, "scripts", "link.lua")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(base, "outside"), filepath.Join(plugin, "lib")); err != nil {
		t.Fatal(err)
	}
	var buf syncBuffer
	e := pluginEngine(t, dir, &buf)
	load := func() string { return evalString(t, e, `{"tool":"rules_load"}`) }
	tool := func(luaFile string) string {
		return "[[tools]]\nname = \"t\"\nlua_file = " + jsonText(luaFile) + "\n"
	}
	for _, c := range []struct{ what, file, text, want string }{
		{"an absolute lua_file", "tools/t.toml", tool(outside),
			`tool \"t\": lua_file \"` + outside + `\" leaves the plugin's folder (` + outside + ` is outside ` + plugin + `)`},
		{"a lua_file that is a link out", "tools/t.toml", tool("scripts/link.lua"),
			`lua_file \"scripts/link.lua\" leaves the plugin's folder (` + filepath.Join(plugin, "scripts", "link.lua") + ` leads outside ` + plugin + ` through a symbolic link)`},
		{"a lua_file through a linked folder", "tools/t.toml", tool("lib/x.lua"),
			`leads outside ` + plugin + ` through a symbolic link`},
		{"a lua_file going up", "tools/t.toml", tool("../../../outside/x.lua"), `leaves the plugin's folder`},
		{"a rule's script going up", "rules/bad.toml", scriptRule("../../../outside/x.lua"),
			`script: ` + outside + ` is outside ` + plugin},
		{"a rule's script into the project", "rules/bad.toml", scriptRule("../../shared/s.lua"),
			`script: ` + filepath.Join(dir, "shared", "s.lua") + ` is outside ` + plugin},
		{"a rule's absolute script", "rules/bad.toml", scriptRule(outside), `script: ` + outside + ` is outside ` + plugin},
		{"a rule's script that is a link out", "rules/bad.toml", scriptRule("scripts/link.lua"),
			`script: ` + filepath.Join(plugin, "scripts", "link.lua") + ` leads outside ` + plugin + ` through a symbolic link`},
	} {
		writeTree(t, plugin, map[string]string{c.file: c.text})
		out := load()
		if !strings.Contains(out, `"error":"invalid_args"`) || !strings.Contains(out, c.want) {
			t.Errorf("%s: %s\nwant %s", c.what, out, c.want)
		}
		if err := os.Remove(filepath.Join(plugin, c.file)); err != nil {
			t.Fatal(err)
		}
	}
	// Inside the folder, a lua_file or script, relative or absolute, loads.
	writeTree(t, plugin, map[string]string{
		"tools/t.toml":  tool(filepath.Join(plugin, "scripts", "t.lua")),
		"rules/ok.toml": scriptRule("scripts/t.lua"),
	})
	if out := load(); !strings.HasPrefix(out, `{"status":"success"`) {
		t.Fatalf("a plugin that stays inside: %s", out)
	}
	expectEq(t, "the plugin's tool", evalString(t, e, `{"tool":"t"}`), `{"status":"success","tool":"t","result":"inside"}`)

	// The project's own rules stay inside project_root; the host's own
	// configuration may name an absolute lua_file.
	writeTree(t, dir, map[string]string{"rules/r.toml": strings.Replace(scriptRule("../../outside/x.lua"), "scripted", "project", 1)})
	out := string(e.Configure([]byte(`{"rules":{"paths":["rules/*.toml"]}}`)))
	if !strings.Contains(out, `script: `+outside+` is outside `+dir) {
		t.Errorf("a project rule's script outside project_root: %s", out)
	}
	os.Remove(filepath.Join(dir, "rules", "r.toml"))
	out = string(e.Configure([]byte("[plugins]\npaths = []\n" + tool("../outside/x.lua"))))
	if !strings.Contains(out, `tools[0] (t): lua_file: `+outside+` is outside `+dir) {
		t.Errorf("a relative lua_file outside project_root: %s", out)
	}
	mustConfigure(t, e, "[plugins]\npaths = []\n"+tool(outside))
	expectEq(t, "the host's absolute lua_file", evalString(t, e, `{"tool":"t"}`), `{"status":"success","tool":"t","result":"outside"}`)
}

// TestIssue25_scripts_of_rule_files_the_host_names_outside_the_project: a
// rule file an absolute pattern of the configuration finds outside
// project_root is taken as given; its scripts stay inside the folder the
// pattern starts from.
func TestIssue25_scripts_of_rule_files_the_host_names_outside_the_project(t *testing.T) {
	base := t.TempDir()
	writeTree(t, base, map[string]string{
		"project/README":        "",
		"host/rules/a/ok.toml":  strings.Replace(scriptRule("../ok.lua"), "scripted", "ok", 1),
		"host/rules/ok.lua":     "return true\n",
		"host/rules/b/bad.toml": scriptRule("../../x.lua"),
		"host/x.lua":            "return true\n",
	})
	e := rulesEngine(t, "project_root = "+jsonText(filepath.Join(base, "project"))+"\n[rules]\nbuiltin = false\n")
	pattern := filepath.Join(base, "host", "rules", "a", "*.toml")
	mustConfigure(t, e, `{"rules":{"paths":[`+jsonText(filepath.Join(base, "host", "rules", "*", "ok.toml"))+`]}}`)
	out := string(e.Configure([]byte(`{"rules":{"paths":[` + jsonText(filepath.Join(base, "host", "rules", "*", "*.toml")) + `]}}`)))
	if want := `script: ` + filepath.Join(base, "host", "x.lua") + ` is outside ` + filepath.Join(base, "host", "rules"); !strings.Contains(out, want) {
		t.Errorf("a script above the folder the pattern names: %s\nwant %s", out, want)
	}
	// The same file through a pattern that starts lower: its script is
	// above that folder.
	out = string(e.Configure([]byte(`{"rules":{"paths":[` + jsonText(pattern) + `]}}`)))
	if want := `script: ` + filepath.Join(base, "host", "rules", "ok.lua") + ` is outside ` + filepath.Join(base, "host", "rules", "a"); !strings.Contains(out, want) {
		t.Errorf("a script above the folder the pattern names: %s\nwant %s", out, want)
	}
}
