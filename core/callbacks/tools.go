package callbacks

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/clara-lib/clara/core/callbacks/pattern"
	"github.com/clara-lib/clara/core/fsread"
	"github.com/clara-lib/clara/core/protocol"
)

// Limits of a definition.
const (
	maxTimeoutSecs     = 3600
	defaultBGTimeout   = 600 // background runs without timeout_secs
	maxScriptBytes     = 1 << 20
	maxPatternLines    = 256
	maxPatternLineLen  = 4096
	maxDescriptionLen  = 4096
	maxSuccessMsgLen   = 1024
	maxCwdLen          = 4096
	maxCallbacksStored = 10000
)

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

// upsertArgs are callback_upsert's arguments; pointers tell "absent" from
// "zero".
type upsertArgs struct {
	Action         string          `json:"action"`
	ID             *string         `json:"id"`
	Name           *string         `json:"name"`
	Description    *string         `json:"description"`
	Pattern        json.RawMessage `json:"pattern"`
	Blocking       *bool           `json:"blocking"`
	TimeoutSecs    *int            `json:"timeout_secs"`
	Timeout        *int            `json:"timeout"` // seed 001's name for timeout_secs
	SuccessMessage *string         `json:"success_message"`
	Cwd            *string         `json:"cwd"`
	OneAtATime     *bool           `json:"one_at_a_time"`
	OncePerBatch   *bool           `json:"once_per_batch"`
	OnBusy         *string         `json:"on_busy"`
	PassFiles      *string         `json:"pass_files"`
	ScriptContent  *string         `json:"script_content"`
	OldString      *string         `json:"old_string"`
	NewString      *string         `json:"new_string"`
}

func invalid(format string, args ...any) error {
	return protocol.Errorf(protocol.InvalidArgs, format, args...)
}

// decodeArgs decodes a JSON object strictly: unknown keys are errors.
func decodeArgs(tool string, args []byte, v any) error {
	if len(bytes.TrimSpace(args)) == 0 {
		args = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return invalid("%s: %s", tool, strings.TrimPrefix(err.Error(), "json: "))
	}
	if dec.More() {
		return invalid("%s: trailing data after the arguments", tool)
	}
	return nil
}

func parsePattern(raw json.RawMessage) ([]string, error) {
	var lines []string
	var one string
	switch {
	case json.Unmarshal(raw, &one) == nil:
		lines = []string{one}
	case json.Unmarshal(raw, &lines) == nil:
	default:
		return nil, invalid("callback_upsert: pattern must be a string or an array of strings")
	}
	if len(lines) == 0 {
		return nil, invalid("callback_upsert: pattern is empty")
	}
	if len(lines) > maxPatternLines {
		return nil, invalid("callback_upsert: pattern has %d lines, at most %d", len(lines), maxPatternLines)
	}
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			return nil, invalid("callback_upsert: pattern has an empty line")
		}
		if len(l) > maxPatternLineLen || strings.ContainsAny(l, "\n\r\x00") {
			return nil, invalid("callback_upsert: pattern line %q is too long or holds a newline or NUL", truncate(l, 80))
		}
	}
	if _, err := pattern.Compile(lines); err != nil {
		return nil, invalid("callback_upsert: pattern: %v", err)
	}
	return lines, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// checkCwd checks a callback's cwd: relative, lexically inside the root,
// and, for the part of it that exists, not resolving through a symbolic
// link to a place outside the root. It returns the cleaned form ("" for
// the root itself).
func checkCwd(root, cwd string) (string, error) {
	if cwd == "" || cwd == "." {
		return "", nil
	}
	if len(cwd) > maxCwdLen || strings.ContainsRune(cwd, 0) {
		return "", fmt.Errorf("cwd is too long or holds a NUL")
	}
	if filepath.IsAbs(cwd) {
		return "", fmt.Errorf("cwd %q is absolute; it must be relative to the project root", cwd)
	}
	clean := filepath.Clean(cwd)
	if !filepath.IsLocal(clean) {
		return "", fmt.Errorf("cwd %q leaves the project root", cwd)
	}
	if clean == "." {
		return "", nil
	}
	if _, err := resolveCwd(root, clean); err != nil {
		return "", err
	}
	return filepath.ToSlash(clean), nil
}

// resolveCwd returns the absolute working directory for cwd (clean and
// local), after checking that its deepest existing ancestor resolves
// inside the resolved project root.
func resolveCwd(root, cwd string) (string, error) {
	abs := filepath.Join(root, filepath.FromSlash(cwd))
	if cwd == "" {
		return root, nil
	}
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return abs, nil // no root on disk yet: nothing can resolve elsewhere
	}
	p := abs
	for {
		real, err := filepath.EvalSymlinks(p)
		if err == nil {
			if rel, err := filepath.Rel(realRoot, real); err != nil || !filepath.IsLocal(rel) && rel != "." {
				return "", fmt.Errorf("cwd %q resolves to %s, outside the project root", cwd, real)
			}
			return abs, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("cwd %q: %v", cwd, err)
		}
		parent := filepath.Dir(p)
		if parent == p || len(parent) < len(root) {
			return abs, nil
		}
		p = parent
	}
}

// Upsert is the callback_upsert tool: create, update or delete a callback
// for the calling session's worker.
//
// Result: {"action":"created"|"updated","callback":CALLBACK,"script_path":PATH}
// or {"action":"deleted","id":ID,"name":NAME}, where CALLBACK is a
// Definition plus "active" (for the calling worker).
func (m *Manager) Upsert(session string, args []byte) ([]byte, error) {
	return m.UpsertBy(session, args, false)
}

// UpsertBy is Upsert where byModel says that the call was made by a model
// (or a rule or a tool) rather than the host: a script it writes is
// marked ByModel.
func (m *Manager) UpsertBy(session string, args []byte, byModel bool) ([]byte, error) {
	var a upsertArgs
	if err := decodeArgs("callback_upsert", args, &a); err != nil {
		return nil, err
	}
	switch a.Action {
	case "create":
		return m.create(workerOf(session), &a, byModel)
	case "update":
		return m.update(workerOf(session), &a, byModel)
	case "delete":
		return m.delete(workerOf(session), &a)
	case "":
		return nil, invalid("callback_upsert: action is required: create, update or delete")
	default:
		return nil, invalid("callback_upsert: unknown action %q: create, update or delete", a.Action)
	}
}

// apply copies the fields given in a onto d and checks the result.
func (m *Manager) apply(d *Definition, a *upsertArgs, creating bool) error {
	return applyArgs(m.options().ProjectRoot, d, a, creating)
}

func applyArgs(root string, d *Definition, a *upsertArgs, creating bool) error {
	if a.Name != nil {
		if !nameRE.MatchString(*a.Name) {
			return invalid("callback_upsert: name %q must match ^[a-z0-9][a-z0-9_-]{0,63}$", *a.Name)
		}
		d.Name = *a.Name
	}
	if a.Description != nil {
		if len(*a.Description) > maxDescriptionLen {
			return invalid("callback_upsert: description is longer than %d bytes", maxDescriptionLen)
		}
		d.Description = *a.Description
	}
	if a.Pattern != nil {
		lines, err := parsePattern(a.Pattern)
		if err != nil {
			return err
		}
		d.Pattern = lines
	}
	if a.Blocking != nil {
		d.Blocking = *a.Blocking
	}
	if a.Timeout != nil {
		if a.TimeoutSecs != nil && *a.TimeoutSecs != *a.Timeout {
			return invalid("callback_upsert: timeout %d and timeout_secs %d disagree; give one", *a.Timeout, *a.TimeoutSecs)
		}
		a.TimeoutSecs = a.Timeout
	}
	if a.TimeoutSecs != nil {
		if *a.TimeoutSecs < 1 || *a.TimeoutSecs > maxTimeoutSecs {
			return invalid("callback_upsert: timeout_secs %d is out of range 1..%d", *a.TimeoutSecs, maxTimeoutSecs)
		}
		d.TimeoutSecs = *a.TimeoutSecs
	}
	if a.SuccessMessage != nil {
		if len(*a.SuccessMessage) > maxSuccessMsgLen {
			return invalid("callback_upsert: success_message is longer than %d bytes", maxSuccessMsgLen)
		}
		d.SuccessMessage = *a.SuccessMessage
	}
	if a.Cwd != nil {
		cwd, err := checkCwd(root, *a.Cwd)
		if err != nil {
			return invalid("callback_upsert: %v", err)
		}
		d.Cwd = cwd
	}
	if a.OneAtATime != nil {
		d.OneAtATime = *a.OneAtATime
	}
	if a.OncePerBatch != nil {
		d.OncePerBatch = *a.OncePerBatch
	}
	if a.OnBusy != nil {
		if err := checkOnBusy(*a.OnBusy); err != nil {
			return invalid("callback_upsert: %v", err)
		}
		d.OnBusy = *a.OnBusy
	}
	if a.PassFiles != nil {
		if err := checkPassFiles(*a.PassFiles); err != nil {
			return invalid("callback_upsert: %v", err)
		}
		d.PassFiles = *a.PassFiles
	}
	d.normalize()
	if creating && d.Name == "" {
		return invalid("callback_upsert: name is required to create a callback")
	}
	if len(d.Pattern) == 0 {
		return invalid("callback_upsert: pattern is required to create a callback")
	}
	if d.Blocking && d.TimeoutSecs == 0 {
		return invalid("callback_upsert: timeout_secs (1..%d) is required for a blocking callback", maxTimeoutSecs)
	}
	return nil
}

func (m *Manager) create(worker string, a *upsertArgs, byModel bool) ([]byte, error) {
	if a.ID != nil {
		return nil, invalid("callback_upsert: create takes no id; ids are given out")
	}
	if a.ScriptContent == nil {
		return nil, invalid("callback_upsert: script_content is required to create a callback")
	}
	if a.OldString != nil || a.NewString != nil {
		return nil, invalid("callback_upsert: old_string/new_string edit an existing script; create takes script_content")
	}
	if err := checkScript(*a.ScriptContent); err != nil {
		return nil, err
	}
	d := &Definition{ByModel: byModel}
	if err := m.apply(d, a, true); err != nil {
		return nil, err
	}
	t, err := m.begin()
	if err != nil {
		return nil, err
	}
	defer t.end()
	if m.configured(d.Name) != nil {
		return nil, invalid("callback_upsert: the configuration declares a callback named %q ([[callbacks]]); choose another name", d.Name)
	}
	if _, old := t.find(d.Name); old != nil && old.Name == d.Name {
		return nil, invalid("callback_upsert: a callback named %q exists (%s); update it", d.Name, old.ID)
	}
	if len(t.doc.Callbacks) >= maxCallbacksStored {
		return nil, invalid("callback_upsert: %d callbacks stored, the most there may be", maxCallbacksStored)
	}
	d.ID = fmt.Sprintf("CB%d", t.doc.NextID)
	t.doc.NextID++
	path := t.scriptPath(d.Name)
	if err := writeAtomic(path, scriptText(d, *a.ScriptContent), 0o755); err != nil {
		return nil, fmt.Errorf("callback_upsert: write the script: %w", err)
	}
	t.doc.Callbacks = append(t.doc.Callbacks, d)
	if err := t.saveDefs(); err != nil {
		t.doc.Callbacks = t.doc.Callbacks[:len(t.doc.Callbacks)-1]
		os.Remove(path)
		return nil, fmt.Errorf("callback_upsert: %w", err)
	}
	if err := t.setActive(worker, true, d.ID); err != nil {
		return nil, fmt.Errorf("callback_upsert: created %s but could not activate it: %w", d.ID, err)
	}
	return json.Marshal(upsertResult{Action: "created", Callback: listed{*d, true}, ScriptPath: path})
}

type upsertResult struct {
	Action     string `json:"action"`
	Callback   listed `json:"callback"`
	ScriptPath string `json:"script_path"`
}

// listed is a definition as the tools show it: with "active".
type listed struct {
	Definition
	Active bool `json:"active"`
}

func checkScript(s string) error {
	if len(s) > maxScriptBytes {
		return invalid("callback_upsert: script_content is longer than %d bytes", maxScriptBytes)
	}
	if strings.ContainsRune(s, 0) {
		return invalid("callback_upsert: script_content holds a NUL byte")
	}
	return nil
}

func (m *Manager) update(worker string, a *upsertArgs, byModel bool) ([]byte, error) {
	key := ""
	switch {
	case a.ID != nil:
		key = *a.ID
	case a.Name != nil:
		key = *a.Name
	default:
		return nil, invalid("callback_upsert: update needs the id (or name) of the callback")
	}
	if err := m.notConfigured("callback_upsert", key); err != nil {
		return nil, err
	}
	if a.ScriptContent != nil && (a.OldString != nil || a.NewString != nil) {
		return nil, invalid("callback_upsert: give script_content or old_string/new_string, not both")
	}
	if (a.OldString == nil) != (a.NewString == nil) {
		return nil, invalid("callback_upsert: old_string and new_string go together")
	}
	if a.ScriptContent != nil {
		if err := checkScript(*a.ScriptContent); err != nil {
			return nil, err
		}
	}
	t, err := m.begin()
	if err != nil {
		return nil, err
	}
	defer t.end()
	i, old := t.find(key)
	if old == nil {
		return nil, invalid("callback_upsert: no callback %q", key)
	}
	d := *old
	d.Pattern = append([]string(nil), old.Pattern...)
	if err := m.apply(&d, a, false); err != nil {
		return nil, err
	}
	if d.Name != old.Name {
		if _, other := t.find(d.Name); other != nil {
			return nil, invalid("callback_upsert: a callback named %q exists (%s)", d.Name, other.ID)
		}
	}
	oldPath, newPath := t.scriptPath(old.Name), t.scriptPath(d.Name)
	// The script: rewritten when its content, or its name (the header
	// names it), changes.
	var content *string
	switch {
	case a.ScriptContent != nil:
		content = a.ScriptContent
	case a.OldString != nil || d.Name != old.Name:
		file, err := fsread.File(oldPath, maxScriptFile)
		if err != nil {
			return nil, fmt.Errorf("callback_upsert: read the script of %s: %w", old.ID, err)
		}
		s := scriptContent(file)
		if a.OldString != nil {
			switch n := strings.Count(s, *a.OldString); n {
			case 0:
				return nil, invalid("callback_upsert: old_string was not found in the script of %q", old.Name)
			case 1:
				s = strings.Replace(s, *a.OldString, *a.NewString, 1)
			default:
				return nil, invalid("callback_upsert: old_string occurs %d times in the script of %q; give more context so it occurs once", n, old.Name)
			}
			if err := checkScript(s); err != nil {
				return nil, err
			}
		}
		content = &s
	}
	if a.ScriptContent != nil || a.OldString != nil {
		d.ByModel = byModel // whoever wrote the script last
	}
	if content != nil {
		if err := writeAtomic(newPath, scriptText(&d, *content), 0o755); err != nil {
			return nil, fmt.Errorf("callback_upsert: write the script: %w", err)
		}
	}
	t.doc.Callbacks[i] = &d
	if err := t.saveDefs(); err != nil {
		t.doc.Callbacks[i] = old
		if newPath != oldPath {
			os.Remove(newPath)
		}
		return nil, fmt.Errorf("callback_upsert: %w", err)
	}
	if newPath != oldPath {
		if err := removeSynced(oldPath); err != nil {
			m.logf("warn", "rename %s: remove the old script: %v", d.ID, err)
		}
	}
	w, err := m.activeFor(worker)
	if err != nil {
		return nil, err
	}
	return json.Marshal(upsertResult{Action: "updated", Callback: listed{d, w.active[d.ID]}, ScriptPath: newPath})
}

func (m *Manager) delete(worker string, a *upsertArgs) ([]byte, error) {
	key := ""
	switch {
	case a.ID != nil:
		key = *a.ID
	case a.Name != nil:
		key = *a.Name
	default:
		return nil, invalid("callback_upsert: delete needs the id (or name) of the callback")
	}
	if err := m.notConfigured("callback_upsert", key); err != nil {
		return nil, err
	}
	t, err := m.begin()
	if err != nil {
		return nil, err
	}
	defer t.end()
	i, d := t.find(key)
	if d == nil {
		return nil, invalid("callback_upsert: no callback %q", key)
	}
	t.doc.Callbacks = append(t.doc.Callbacks[:i:i], t.doc.Callbacks[i+1:]...)
	if err := t.saveDefs(); err != nil {
		return nil, fmt.Errorf("callback_upsert: %w", err)
	}
	if err := removeSynced(t.scriptPath(d.Name)); err != nil {
		m.logf("warn", "delete %s: remove the script: %v", d.ID, err)
	}
	// Every worker's file forgets the id now (issue 26 §6): left in
	// another worker's active set, it would read as active there.
	if err := t.setActive(worker, false, d.ID); err != nil {
		m.logf("warn", "delete %s: worker file: %v", d.ID, err)
	}
	if err := t.forgetEverywhere(worker, d.ID); err != nil {
		m.logf("warn", "delete %s: other workers' files: %v", d.ID, err)
	}
	return json.Marshal(struct {
		Action string `json:"action"`
		ID     string `json:"id"`
		Name   string `json:"name"`
	}{"deleted", d.ID, d.Name})
}

// Toggle is the callback_toggle tool: {id, active} turns a callback (by id
// or name) on or off for the calling session's worker.
//
// Result: {"id":ID,"name":NAME,"active":BOOL}.
func (m *Manager) Toggle(session string, args []byte) ([]byte, error) {
	var a struct {
		ID     *string `json:"id"`
		Active *bool   `json:"active"`
	}
	if err := decodeArgs("callback_toggle", args, &a); err != nil {
		return nil, err
	}
	if a.ID == nil || a.Active == nil {
		return nil, invalid("callback_toggle: id and active are required")
	}
	if err := m.notConfigured("callback_toggle", *a.ID); err != nil {
		return nil, err
	}
	worker := workerOf(session)
	t, err := m.begin()
	if err != nil {
		return nil, err
	}
	defer t.end()
	_, d := t.find(*a.ID)
	if d == nil {
		return nil, invalid("callback_toggle: no callback %q", *a.ID)
	}
	if err := t.setActive(worker, *a.Active, d.ID); err != nil {
		return nil, fmt.Errorf("callback_toggle: %w", err)
	}
	return json.Marshal(struct {
		ID     string `json:"id"`
		Name   string `json:"name"`
		Active bool   `json:"active"`
	}{d.ID, d.Name, *a.Active})
}

// List is the callback_list tool.
//
// Result: {"worker":WORKER,"callbacks":[CALLBACK...]}, each CALLBACK a
// Definition plus "active" for the calling session's worker, in creation
// order.
func (m *Manager) List(session string, args []byte) ([]byte, error) {
	var a struct{}
	if err := decodeArgs("callback_list", args, &a); err != nil {
		return nil, err
	}
	worker := workerOf(session)
	s, err := m.current()
	if err != nil {
		return nil, fmt.Errorf("callback_list: %w", err)
	}
	w, err := m.activeFor(worker)
	if err != nil {
		return nil, fmt.Errorf("callback_list: %w", err)
	}
	out := struct {
		Worker    string   `json:"worker"`
		Callbacks []listed `json:"callbacks"`
	}{worker, make([]listed, 0, len(s.list))}
	for _, e := range s.list {
		out.Callbacks = append(out.Callbacks, listed{*e.def, w.isActive(e.def)})
	}
	return json.Marshal(out)
}

// Get is the callback_get tool: {id} (an id or a name).
//
// Result: CALLBACK (a Definition plus "active") with "script" (the user's
// part of the script file) and "script_path".
func (m *Manager) Get(session string, args []byte) ([]byte, error) {
	var a struct {
		ID *string `json:"id"`
	}
	if err := decodeArgs("callback_get", args, &a); err != nil {
		return nil, err
	}
	if a.ID == nil {
		return nil, invalid("callback_get: id is required")
	}
	s, err := m.current()
	if err != nil {
		return nil, fmt.Errorf("callback_get: %w", err)
	}
	e := s.byID[*a.ID]
	if e == nil {
		e = s.byName[*a.ID]
	}
	if e == nil {
		return nil, invalid("callback_get: no callback %q", *a.ID)
	}
	w, err := m.activeFor(workerOf(session))
	if err != nil {
		return nil, fmt.Errorf("callback_get: %w", err)
	}
	type got struct {
		listed
		Script     string `json:"script"`
		ScriptPath string `json:"script_path"`
	}
	if e.def.Configured {
		return json.Marshal(got{listed{*e.def, true}, e.def.run, ""})
	}
	path := filepath.Join(s.dir, scriptsDir, e.def.Name+".sh")
	file, err := fsread.File(path, maxScriptFile)
	if err != nil {
		return nil, fmt.Errorf("callback_get: read the script: %w", err)
	}
	return json.Marshal(got{listed{*e.def, w.isActive(e.def)}, strings.ToValidUTF8(scriptContent(file), "\uFFFD"), path})
}

// notConfigured refuses to change a callback the configuration declares.
func (m *Manager) notConfigured(tool, key string) error {
	if d := m.configured(key); d != nil {
		return invalid("%s: callback %q is declared in the configuration ([[callbacks]]): change it there", tool, d.Name)
	}
	return nil
}
