package core_test

// Hot reload (rules.watch, issue 14): rule files, their Lua scripts and
// plugins edited on disk reload through the same path as rules_load.

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/clara-lib/clara/core"
	"github.com/clara-lib/clara/core/logging"
)

// waitFor polls cond until it holds; the deadline only bounds a failure.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited a minute for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// saveLikeAnEditor writes text to path the way editors save: a new file
// written beside it, renamed over it, its mode set.
func saveLikeAnEditor(t testing.TB, path, text string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), ".save-"+filepath.Base(path))
	if err := os.WriteFile(tmp, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
}

func greetRule(message string) string {
	return "[rule]\nid = \"greet\"\ntrigger = \"visit\"\n[action]\ntype = \"notify_self\"\nmessage = \"" + message + "\"\n"
}

func TestHotReload_rulesScriptsAndPlugins(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		".clara/rules/greet.toml":       greetRule("v1"),
		".clara/rules/lua.toml":         "[rule]\nid = \"scripted\"\ntrigger = \"visit\"\n[action]\ntype = \"lua\"\nscript = \"check.lua\"\n",
		".clara/rules/check.lua":        "notify(\"lua v1\")\n",
		".clara/plugins/p/plugin.toml":  "name = \"p\"\n",
		".clara/plugins/p/rules/r.toml": "[rule]\nid = \"plugged\"\ntrigger = \"visit\"\n[action]\ntype = \"notify_self\"\nmessage = \"plugin v1\"\n",
	})
	var buf syncBuffer
	log := logging.New(func(l logging.Level, m string) { buf.Write([]byte(l.String() + " " + m + "\n")) }, logging.Debug)
	e := core.New(core.Options{Logger: log})
	t.Cleanup(e.Close)
	mustConfigure(t, e, "project_root = "+jsonText(dir)+"\nstate_dir = "+jsonText(filepath.Join(dir, ".clara"))+"\n[rules]\nbuiltin = false\n")
	visit := func() string { return strings.Join(notices(t, emitString(t, e, `{"event":"visit"}`)), " | ") }
	expectEq(t, "before any edit", visit(), "v1 | lua v1 | plugin v1")
	if on, dirs := e.Watching(); !on || len(dirs) != 4 {
		t.Fatalf("watching %v: %q", on, dirs) // rules/, plugins/, plugins/p, plugins/p/rules
	}

	saveLikeAnEditor(t, filepath.Join(dir, ".clara", "rules", "greet.toml"), greetRule("v2"))
	waitFor(t, "the edited rule", func() bool { return visit() == "v2 | lua v1 | plugin v1" })

	saveLikeAnEditor(t, filepath.Join(dir, ".clara", "rules", "check.lua"), "notify(\"lua v2\")\n")
	waitFor(t, "the edited script", func() bool { return visit() == "v2 | lua v2 | plugin v1" })

	if err := writeFile(filepath.Join(dir, ".clara", "plugins", "p", "rules", "r.toml"),
		"[rule]\nid = \"plugged\"\ntrigger = \"visit\"\n[action]\ntype = \"notify_self\"\nmessage = \"plugin v2\"\n"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the edited plugin", func() bool { return visit() == "v2 | lua v2 | plugin v2" })

	// A broken edit: the rules in force stay, the log says where.
	greet := filepath.Join(dir, ".clara", "rules", "greet.toml")
	saveLikeAnEditor(t, greet, "[rule]\nid = \"greet\"\ntrigger = = \"visit\"\n")
	waitFor(t, "the reload's error in the log", func() bool {
		return strings.Contains(buf.String(), "error rules reload: "+greet+":3:")
	})
	expectEq(t, "after a broken edit", visit(), "v2 | lua v2 | plugin v2")

	// A new rule file in a watched folder comes in, with the mended one.
	saveLikeAnEditor(t, greet, greetRule("v3"))
	writeTree(t, dir, map[string]string{".clara/rules/more.toml": "[rule]\nid = \"more\"\ntrigger = \"visit\"\n[action]\ntype = \"notify_self\"\nmessage = \"more\"\n"})
	waitFor(t, "the mended and the new file", func() bool { return visit() == "v3 | lua v2 | more | plugin v2" })

	// Without a state_dir nothing is watched; Close waits for the watcher.
	mustConfigure(t, e, "state_dir = \"\"\n")
	if on, _ := e.Watching(); on {
		t.Fatal("still watching with state_dir = \"\"")
	}
}

func TestHotReload_stopsOnResetAndClose(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{".clara/rules/greet.toml": greetRule("v1")})
	e := core.New(core.Options{})
	mustConfigure(t, e, "project_root = "+jsonText(dir)+"\nstate_dir = "+jsonText(filepath.Join(dir, ".clara"))+"\n")
	if on, _ := e.Watching(); !on {
		t.Fatal("not watching")
	}
	e.Reset()
	if on, _ := e.Watching(); on {
		t.Fatal("still watching after a reset to a configuration without rule files")
	}
	mustConfigure(t, e, "project_root = "+jsonText(dir)+"\nstate_dir = "+jsonText(filepath.Join(dir, ".clara"))+"\n[rules]\nwatch = false\n")
	if on, _ := e.Watching(); on {
		t.Fatal("watching with rules.watch = false")
	}
	mustConfigure(t, e, "[rules]\nwatch = true\n")
	if on, _ := e.Watching(); !on {
		t.Fatal("not watching again")
	}
	e.Close() // returns once the goroutine is gone
	if on, _ := e.Watching(); on {
		t.Fatal("watching after Close")
	}
	if stacks := goroutines(); strings.Contains(stacks, "core.(*ruleWatcher).loop") {
		t.Fatalf("the watcher's goroutine outlived Close:\n%s", stacks)
	}
	// fsnotify's own reader ends once its inotify descriptor is closed.
	waitFor(t, "fsnotify's goroutine to end", func() bool { return !strings.Contains(goroutines(), "fsnotify") })
}

func goroutines() string {
	buf := make([]byte, 1<<20)
	return string(buf[:runtime.Stack(buf, true)])
}

// denyEcho is a rule file that denies the echo tool.
const denyEcho = "[rule]\nid = \"no-echo\"\ntrigger = \"on_tool_call\"\n[condition]\nexpression = \"context.tool.name == 'echo'\"\n[action]\ntype = \"deny\"\nreason = \"no echo here\"\n"

// watchedEngine is an engine watching the project dir, its log in buf.
func watchedEngine(t *testing.T, dir string, buf *syncBuffer, more string) *core.Engine {
	t.Helper()
	log := logging.New(func(l logging.Level, m string) { buf.Write([]byte(l.String() + " " + m + "\n")) }, logging.Debug)
	e := core.New(core.Options{Logger: log})
	t.Cleanup(e.Close)
	mustConfigure(t, e, "project_root = "+jsonText(dir)+"\nstate_dir = "+jsonText(filepath.Join(dir, ".clara"))+"\n[rules]\nbuiltin = false\n"+more)
	return e
}

// echoDenied reports whether a rule denies echo.
func echoDenied(t *testing.T, e *core.Engine) bool {
	out := evalString(t, e, `{"tool":"echo","arguments":{"x":1}}`)
	return strings.Contains(out, "no echo here")
}

// TestIssue25_hot_reload_survives_folders_made_again: once rules/ or
// plugins/ was deleted and made again (a checkout, rsync --delete), no
// change was ever seen again, and the deny rules in them were gone for
// good.
func TestIssue25_hot_reload_survives_folders_made_again(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		".clara/rules/deny.toml":        denyEcho,
		".clara/plugins/p/plugin.toml":  "name = \"p\"\n",
		".clara/plugins/p/rules/r.toml": greetRule("plugin v1"),
	})
	var buf syncBuffer
	e := watchedEngine(t, dir, &buf, "")
	visit := func() string { return strings.Join(notices(t, emitString(t, e, `{"event":"visit"}`)), " | ") }
	if !echoDenied(t, e) || visit() != "plugin v1" {
		t.Fatal("the rules did not load")
	}
	rules, plugins := filepath.Join(dir, ".clara", "rules"), filepath.Join(dir, ".clara", "plugins")
	for round := 1; round <= 3; round++ {
		// A checkout: the folder goes, and comes back with other files.
		if err := os.RemoveAll(rules); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the deny rule to go with its folder", func() bool { return !echoDenied(t, e) })
		writeTree(t, dir, map[string]string{".clara/rules/deny.toml": denyEcho})
		waitFor(t, "the deny rule back in the folder made again", func() bool { return echoDenied(t, e) })

		// rsync --delete of plugins/: its folder renamed away, a new one
		// in its place, the old one deleted.
		if err := os.Rename(plugins, plugins+".old"); err != nil {
			t.Fatal(err)
		}
		want := "plugin v" + string(rune('1'+round))
		writeTree(t, dir, map[string]string{
			".clara/plugins/p/plugin.toml":  "name = \"p\"\n",
			".clara/plugins/p/rules/r.toml": greetRule(want),
		})
		if err := os.RemoveAll(plugins + ".old"); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the plugin in the folder made again", func() bool { return visit() == want })
		// And the folders made again are watched themselves.
		saveLikeAnEditor(t, filepath.Join(plugins, "p", "rules", "r.toml"), greetRule(want+" edited"))
		waitFor(t, "an edit in the plugin made again", func() bool { return visit() == want+" edited" })
	}
}

// TestIssue25_hot_reload_starts_in_a_project_without_rules: in a project
// whose rule folders were empty, or missing, when it was configured, no
// watcher ran, and a rule file written later never loaded.
func TestIssue25_hot_reload_starts_in_a_project_without_rules(t *testing.T) {
	for _, c := range []struct {
		name, more string
		tree       map[string]string
		file       string
	}{
		{"empty folders", "", map[string]string{".clara/rules/.keep": "", ".clara/plugins/.keep": ""}, ".clara/rules/deny.toml"},
		{"no folders", "", map[string]string{"README": ""}, ".clara/rules/deny.toml"},
		{"a plugin later", "", map[string]string{"README": ""}, ".clara/plugins/guard/rules/deny.toml"},
		// A pattern the configuration gives must match a file when it is
		// applied (issue 26 §1); a folder made later below it is watched.
		{"a deep pattern", "paths = [\"conf/rules/**/*.toml\"]\n", map[string]string{"conf/rules/log.toml": logRule("quiet")}, "conf/rules/a/deny.toml"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			writeTree(t, dir, c.tree)
			var buf syncBuffer
			e := watchedEngine(t, dir, &buf, c.more)
			if on, _ := e.Watching(); !on {
				t.Fatal("not watching")
			}
			if echoDenied(t, e) {
				t.Fatal("denied before any rule")
			}
			files := map[string]string{c.file: denyEcho}
			if strings.HasPrefix(c.file, ".clara/plugins/guard/") {
				files[".clara/plugins/guard/plugin.toml"] = "name = \"guard\"\n"
			}
			writeTree(t, dir, files)
			waitFor(t, "the rule written after the start", func() bool { return echoDenied(t, e) })
		})
	}
	// An engine left at the default project_root (the process's working
	// directory, here core/, which holds no rule file) watches nothing.
	e := core.New(core.Options{})
	t.Cleanup(e.Close)
	if on, dirs := e.Watching(); on {
		t.Fatalf("the default engine watches %q", dirs)
	}
}
