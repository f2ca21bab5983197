package tools_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clara-lib/clara/core/config"
	"github.com/clara-lib/clara/core/logging"
	"github.com/clara-lib/clara/core/protocol"
	"github.com/clara-lib/clara/core/session"
	"github.com/clara-lib/clara/core/toolbox"
	"github.com/clara-lib/clara/core/tools"
)

// ---------------------------------------------------------------- helpers

// specDefaults are the [limits] defaults of SPEC §11.
var specDefaults = toolbox.Defaults{TimeoutMS: 1000, MaxOutputBytes: 65536}

var fixedNow = time.Date(2023, 11, 14, 22, 13, 20, 123456789, time.UTC) // unix 1700000000

type env struct {
	reg      *toolbox.Registry
	audit    *toolbox.Audit
	kv       *tools.KV
	sessions *session.Table
	defaults toolbox.Defaults
}

// newEnv registers every built-in in a fresh registry.
func newEnv(t testing.TB) *env {
	t.Helper()
	e := &env{reg: toolbox.NewRegistry(), audit: toolbox.NewAudit(&logging.Logger{}), kv: tools.NewKV(),
		sessions: &session.Table{}, defaults: specDefaults}
	for _, b := range tools.All(tools.Deps{Now: func() time.Time { return fixedNow }, Registry: e.reg, Audit: e.audit, KV: e.kv, Sessions: e.sessions}) {
		tl, err := b.Tool()
		if err != nil {
			t.Fatal(err)
		}
		if err := e.reg.Register(tl); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// builtin builds one built-in tool, without the engine's.
func builtin(t testing.TB, name string) *toolbox.Tool {
	t.Helper()
	for _, b := range tools.All(tools.Deps{}) {
		if b.Name == name {
			tl, err := b.Tool()
			if err != nil {
				t.Fatal(err)
			}
			return tl
		}
	}
	t.Fatalf("no built-in %s", name)
	return nil
}

// run validates args and executes the tool the way the pipeline does;
// it answers the output, or "code: message | details".
func (e *env) run(t testing.TB, name, session, args string, scope toolbox.Scope) string {
	t.Helper()
	tl, ok := e.reg.Lookup(name)
	if !ok {
		t.Fatalf("no tool %s", name)
	}
	if perr := tl.Validate([]byte(args)); perr != nil {
		return errString(perr)
	}
	out, truncated, perr := tl.Execute(context.Background(), toolbox.Call{Session: session, Arguments: []byte(args), Scope: scope}, e.defaults)
	if perr != nil {
		return errString(perr)
	}
	if truncated {
		t.Errorf("%s: truncated", name)
	}
	if !json.Valid(out) {
		t.Errorf("%s answered invalid JSON: %s", name, out)
	}
	return string(out)
}

func (e *env) call(t testing.TB, name, session, args string) string {
	t.Helper()
	return e.run(t, name, session, args, toolbox.Scope{})
}

func errString(perr *protocol.Error) string {
	if perr.Details != nil {
		return fmt.Sprintf("%s: %s | %s", perr.Code, perr.Message, perr.Details)
	}
	return fmt.Sprintf("%s: %s", perr.Code, perr.Message)
}

// jstr is s as a JSON string, escaped the way Clara escapes (no HTML escapes).
func jstr(s string) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}

// ---------------------------------------------------------------- Builtins

func TestBuiltins_set(t *testing.T) {
	var got []string
	for _, b := range tools.All(tools.Deps{}) {
		tl, err := b.Tool()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%s visible=%v admin=%v", tl.Name, tl.LLMVisible, tl.Admin))
		if !tl.Builtin || !tl.Inline || tl.Returns != "json" {
			t.Errorf("%s: builtin %v inline %v returns %s", tl.Name, tl.Builtin, tl.Inline, tl.Returns)
		}
		if tl.Description == "" {
			t.Errorf("%s has no description", tl.Name)
		}
		if tl.Name != "echo" && !tl.HasSchema() {
			t.Errorf("%s has no schema", tl.Name)
		}
	}
	want := []string{"echo visible=true admin=false", "get_time visible=true admin=false", "math_eval visible=true admin=false",
		"kv_set visible=true admin=false", "kv_get visible=true admin=false", "kv_delete visible=true admin=false",
		"kv_list visible=true admin=false", "tools_list visible=false admin=false", "tool_limits visible=false admin=true", "audit_tail visible=false admin=false",
		"audit_reopen visible=false admin=true", "session_policy visible=false admin=true", "notifications_drain visible=true admin=false"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %v\nwant %v", got, want)
	}
	// Built-ins cannot be replaced by host tools.
	e := newEnv(t)
	host, _ := toolbox.NewTool(toolbox.Descriptor{Name: "kv_get"}, toolbox.ToolOptions{Run: func(context.Context, toolbox.Call) ([]byte, error) { return nil, nil }})
	if err := e.reg.Register(host); err == nil {
		t.Error("a host tool replaced kv_get")
	}
}

func TestEcho_returnsArguments(t *testing.T) {
	e := newEnv(t)
	for _, a := range []string{`{}`, `{"message":"hello"}`, `{"a":[1,{"b":null}],"s":"é\n"}`} {
		if got := e.call(t, "echo", "s", a); got != a {
			t.Errorf("echo(%s) = %s", a, got)
		}
	}
}

// ---------------------------------------------------------------- get_time

func TestGetTime_zones(t *testing.T) {
	e := newEnv(t)
	for _, c := range []struct{ args, want string }{
		{`{}`, `{"time":"2023-11-14T22:13:20.123+00:00","timezone":"UTC","unix":1700000000}`},
		{`{"timezone":"UTC"}`, `{"time":"2023-11-14T22:13:20.123+00:00","timezone":"UTC","unix":1700000000}`},
		{`{"timezone":"Europe/Paris"}`, `{"time":"2023-11-14T23:13:20.123+01:00","timezone":"Europe/Paris","unix":1700000000}`},
		{`{"timezone":"America/New_York"}`, `{"time":"2023-11-14T17:13:20.123-05:00","timezone":"America/New_York","unix":1700000000}`},
		{`{"timezone":"Asia/Kolkata"}`, `{"time":"2023-11-15T03:43:20.123+05:30","timezone":"Asia/Kolkata","unix":1700000000}`},
		{`{"timezone":"Asia/Kathmandu"}`, `{"time":"2023-11-15T03:58:20.123+05:45","timezone":"Asia/Kathmandu","unix":1700000000}`},
		{`{"timezone":"Pacific/Kiritimati"}`, `{"time":"2023-11-15T12:13:20.123+14:00","timezone":"Pacific/Kiritimati","unix":1700000000}`},
	} {
		if got := e.call(t, "get_time", "s", c.args); got != c.want {
			t.Errorf("get_time(%s)\n got %s\nwant %s", c.args, got, c.want)
		}
	}
}

func TestGetTime_refusals(t *testing.T) {
	e := newEnv(t)
	unknown := func(z string) string {
		return fmt.Sprintf(`invalid_args: get_time: unknown timezone %q (use an IANA name such as "Europe/Paris")`, z)
	}
	for _, c := range []struct{ args, want string }{
		{`{"timezone":"Mars/Olympus"}`, unknown("Mars/Olympus")},
		{`{"timezone":""}`, unknown("")},
		{`{"timezone":"Local"}`, unknown("Local")},
		{`{"timezone":"../../etc/passwd"}`, unknown("../../etc/passwd")},
		{`{"timezone":"/etc/localtime"}`, unknown("/etc/localtime")},
		{`{"tz":"UTC"}`, `invalid_args: tool "get_time": arguments do not match input_schema: at the top: additional properties 'tz' not allowed | [{"pointer":"","message":"additional properties 'tz' not allowed"}]`},
		{`{"timezone":5}`, `invalid_args: tool "get_time": arguments do not match input_schema: at /timezone: got number, want string | [{"pointer":"/timezone","message":"got number, want string"}]`},
	} {
		if got := e.call(t, "get_time", "s", c.args); got != c.want {
			t.Errorf("get_time(%s)\n got %s\nwant %s", c.args, got, c.want)
		}
	}
}

func TestGetTime_realClock(t *testing.T) {
	tl := builtin(t, "get_time")
	before := time.Now().Unix()
	out, _, perr := tl.Execute(context.Background(), toolbox.Call{Arguments: []byte(`{}`)}, specDefaults)
	if perr != nil {
		t.Fatal(errString(perr))
	}
	var v struct {
		Time string
		Unix int64
	}
	json.Unmarshal(out, &v)
	ts, err := time.Parse("2006-01-02T15:04:05.000-07:00", v.Time)
	if err != nil || v.Unix < before || v.Unix > time.Now().Unix() || ts.Unix() != v.Unix {
		t.Errorf("%s: %v", out, err)
	}
}

// ---------------------------------------------------------------- kv_*

func TestKV_setGetDeleteList(t *testing.T) {
	e := newEnv(t)
	steps := []struct{ tool, session, args, want string }{
		{"kv_get", "s1", `{"key":"a"}`, `{"key":"a","found":false}`},
		{"kv_list", "s1", `{}`, `{"keys":[],"count":0}`},
		{"kv_delete", "s1", `{"key":"a"}`, `{"key":"a","deleted":false}`},
		{"kv_set", "s1", `{"key":"a","value":1}`, `{"key":"a","created":true}`},
		{"kv_set", "s1", `{"key":"a","value":{"x":[1,2]}}`, `{"key":"a","created":false}`},
		{"kv_get", "s1", `{"key":"a"}`, `{"key":"a","found":true,"value":{"x":[1,2]}}`},
		// Sessions are isolated.
		{"kv_get", "s2", `{"key":"a"}`, `{"key":"a","found":false}`},
		{"kv_set", "s2", `{"key":"a","value":"two"}`, `{"key":"a","created":true}`},
		{"kv_get", "s2", `{"key":"a"}`, `{"key":"a","found":true,"value":"two"}`},
		{"kv_get", "s1", `{"key":"a"}`, `{"key":"a","found":true,"value":{"x":[1,2]}}`},
		{"kv_list", "s2", `{}`, `{"keys":["a"],"count":1}`},
		// Listing is sorted and filtered by prefix.
		{"kv_set", "s1", `{"key":"user:2","value":2}`, `{"key":"user:2","created":true}`},
		{"kv_set", "s1", `{"key":"user:10","value":10}`, `{"key":"user:10","created":true}`},
		{"kv_set", "s1", `{"key":"user:1","value":1}`, `{"key":"user:1","created":true}`},
		{"kv_set", "s1", `{"key":"usex","value":0}`, `{"key":"usex","created":true}`},
		{"kv_set", "s1", `{"key":"B","value":0}`, `{"key":"B","created":true}`},
		{"kv_list", "s1", `{}`, `{"keys":["B","a","user:1","user:10","user:2","usex"],"count":6}`},
		{"kv_list", "s1", `{"prefix":"user:"}`, `{"keys":["user:1","user:10","user:2"],"count":3}`},
		{"kv_list", "s1", `{"prefix":"user:1"}`, `{"keys":["user:1","user:10"],"count":2}`},
		{"kv_list", "s1", `{"prefix":""}`, `{"keys":["B","a","user:1","user:10","user:2","usex"],"count":6}`},
		{"kv_list", "s1", `{"prefix":"zzz"}`, `{"keys":[],"count":0}`},
		{"kv_delete", "s1", `{"key":"a"}`, `{"key":"a","deleted":true}`},
		{"kv_delete", "s1", `{"key":"a"}`, `{"key":"a","deleted":false}`},
		{"kv_get", "s1", `{"key":"a"}`, `{"key":"a","found":false}`},
		{"kv_get", "s2", `{"key":"a"}`, `{"key":"a","found":true,"value":"two"}`},
		{"kv_list", "s1", `{"prefix":"u"}`, `{"keys":["user:1","user:10","user:2","usex"],"count":4}`},
		// Keys with characters JSON must escape.
		{"kv_set", "s3", `{"key":"q\"k\\\n","value":true}`, `{"key":"q\"k\\\n","created":true}`},
		{"kv_get", "s3", `{"key":"q\"k\\\n"}`, `{"key":"q\"k\\\n","found":true,"value":true}`},
		{"kv_list", "s3", `{}`, `{"keys":["q\"k\\\n"],"count":1}`},
		{"kv_set", "s3", `{"key":"\u00e9t\u00e9","value":1}`, `{"key":"été","created":true}`},
		{"kv_get", "s3", `{"key":"été"}`, `{"key":"été","found":true,"value":1}`},
	}
	for i, s := range steps {
		if got := e.call(t, s.tool, s.session, s.args); got != s.want {
			t.Errorf("step %d: %s(%s) in %s\n got %s\nwant %s", i, s.tool, s.args, s.session, got, s.want)
		}
	}
	e.kv.DropSession("s1")
	if got := e.call(t, "kv_list", "s1", `{}`); got != `{"keys":[],"count":0}` {
		t.Errorf("after DropSession: %s", got)
	}
	if got := e.call(t, "kv_get", "s2", `{"key":"a"}`); got != `{"key":"a","found":true,"value":"two"}` {
		t.Errorf("DropSession touched another session: %s", got)
	}
}

func TestKV_valuesRoundTrip(t *testing.T) {
	e := newEnv(t)
	for i, v := range []string{
		`null`, `true`, `false`, `0`, `-1.5e3`, `12345678901234567890`, `3.141592653589793`,
		`""`, `"text with \"quotes\", \\ and \n"`, `"é😀\u0000"`, `[]`, `{}`, `[1,"a",null,[true,{"k":[]}]]`,
		`{"nested":{"deep":{"deeper":[1,2,{"x":"y"}]}},"n":-0.0}`,
	} {
		key := fmt.Sprint("k", i)
		if got := e.call(t, "kv_set", "s", fmt.Sprintf(`{"key":%q,"value":%s}`, key, v)); got != fmt.Sprintf(`{"key":%q,"created":true}`, key) {
			t.Errorf("kv_set %s: %s", v, got)
			continue
		}
		want := fmt.Sprintf(`{"key":%q,"found":true,"value":%s}`, key, v)
		if got := e.call(t, "kv_get", "s", fmt.Sprintf(`{"key":%q}`, key)); got != want {
			t.Errorf("kv_get\n got %s\nwant %s", got, want)
		}
	}
}

func TestKV_keyLimit(t *testing.T) {
	e := newEnv(t)
	for _, c := range []struct {
		name, key string
		ok        bool
		bytes     int
	}{
		{"256 ASCII bytes", strings.Repeat("k", 256), true, 256},
		{"257 ASCII bytes", strings.Repeat("k", 257), false, 257},
		{"100 é (200 bytes)", strings.Repeat("é", 100), true, 200},
		{"128 é (256 bytes)", strings.Repeat("é", 128), true, 256},
		{"129 é (258 bytes, 129 characters)", strings.Repeat("é", 129), false, 258},
		{"255 ASCII + é (257 bytes)", strings.Repeat("k", 255) + "é", false, 257},
		{"64 emoji (256 bytes)", strings.Repeat("😀", 64), true, 256},
		{"65 emoji (260 bytes)", strings.Repeat("😀", 65), false, 260},
	} {
		t.Run(c.name, func(t *testing.T) {
			k := jstr(c.key)
			for _, op := range []struct{ tool, args, ok string }{
				{"kv_set", `{"key":` + k + `,"value":1}`, `{"key":` + k + `,"created":true}`},
				{"kv_get", `{"key":` + k + `}`, `{"key":` + k + `,"found":true,"value":1}`},
				{"kv_delete", `{"key":` + k + `}`, `{"key":` + k + `,"deleted":true}`},
			} {
				got := e.call(t, op.tool, "s", op.args)
				want := op.ok
				if !c.ok {
					want = fmt.Sprintf("invalid_args: %s: key is %d bytes, more than the 256 allowed", op.tool, c.bytes)
				}
				if got != want {
					t.Errorf("%s\n got %.120s\nwant %.120s", op.tool, got, want)
				}
			}
		})
	}
	if got := e.call(t, "kv_set", "s", `{"key":"","value":1}`); got != `invalid_args: tool "kv_set": arguments do not match input_schema: at /key: minLength: got 0, want 1 | [{"pointer":"/key","message":"minLength: got 0, want 1"}]` {
		t.Errorf("empty key: %s", got)
	}
	if got := e.call(t, "kv_list", "s", `{}`); got != `{"keys":[],"count":0}` {
		t.Errorf("a refused key was stored: %.200s", got)
	}
}

func TestKV_valueLimit(t *testing.T) {
	e := newEnv(t)
	e.defaults.MaxOutputBytes = 1 << 20                                       // see TestKV_largestValueReadable
	str := func(n int) string { return `"` + strings.Repeat("v", n-2) + `"` } // n bytes of JSON
	if got := e.call(t, "kv_set", "s", `{"key":"max","value":`+str(65536)+`}`); got != `{"key":"max","created":true}` {
		t.Errorf("64 KiB value: %.200s", got)
	}
	if got := e.call(t, "kv_get", "s", `{"key":"max"}`); got != `{"key":"max","found":true,"value":`+str(65536)+`}` {
		t.Errorf("64 KiB value read back: %.200s", got)
	}
	if got, want := e.call(t, "kv_set", "s", `{"key":"big","value":`+str(65537)+`}`), `invalid_args: kv_set: value is 65537 bytes, more than the 65536 allowed`; got != want {
		t.Errorf("\n got %.200s\nwant %s", got, want)
	}
	arr := "[" + strings.Repeat("1,", 40000) + "1]"
	if got, want := e.call(t, "kv_set", "s", `{"key":"big","value":`+arr+`}`), fmt.Sprintf(`invalid_args: kv_set: value is %d bytes, more than the 65536 allowed`, len(arr)); got != want {
		t.Errorf("\n got %.200s\nwant %s", got, want)
	}
	// A refused value does not replace the stored one.
	if got := e.call(t, "kv_set", "s", `{"key":"max","value":`+str(70000)+`}`); !strings.HasPrefix(got, "invalid_args: ") {
		t.Errorf("over-long overwrite: %.100s", got)
	}
	if got := e.call(t, "kv_get", "s", `{"key":"max"}`); got != `{"key":"max","found":true,"value":`+str(65536)+`}` {
		t.Errorf("refused overwrite changed the value: %.100s", got)
	}
	if got := e.call(t, "kv_get", "s", `{"key":"big"}`); got != `{"key":"big","found":false}` {
		t.Errorf("refused value stored: %.100s", got)
	}
}

// TestKV_largestValueReadable: under the configured default
// max_output_bytes (65536), a value kv_set accepts can be read back.
func TestKV_largestValueReadable(t *testing.T) {
	e := newEnv(t) // SPEC defaults
	val := `"` + strings.Repeat("v", 65534) + `"`
	if got := e.call(t, "kv_set", "s", `{"key":"max","value":`+val+`}`); got != `{"key":"max","created":true}` {
		t.Fatalf("kv_set: %.200s", got)
	}
	if got := e.call(t, "kv_get", "s", `{"key":"max"}`); got != `{"key":"max","found":true,"value":`+val+`}` {
		t.Errorf("kv_get: %.200s", got)
	}
}

func TestKV_keyCountLimit(t *testing.T) {
	e := newEnv(t)
	set, _ := e.reg.Lookup("kv_set")
	for i := 0; i < tools.KVMaxKeys; i++ {
		_, _, perr := set.Execute(context.Background(), toolbox.Call{Session: "full", Arguments: []byte(fmt.Sprintf(`{"key":"k%05d","value":%d}`, i, i))}, specDefaults)
		if perr != nil {
			t.Fatalf("key %d: %s", i, errString(perr))
		}
	}
	want := `tool_failed: kv_set: session "full" already holds 10000 keys, the most kv.max_keys allows; delete some first | {"limit":"kv.max_keys","max":10000}`
	if got := e.call(t, "kv_set", "full", `{"key":"one-too-many","value":1}`); got != want {
		t.Errorf("10,001st key\n got %s\nwant %s", got, want)
	}
	// Overwriting an existing key at the limit still works.
	if got := e.call(t, "kv_set", "full", `{"key":"k09999","value":"new"}`); got != `{"key":"k09999","created":false}` {
		t.Errorf("overwrite at the limit: %s", got)
	}
	if got := e.call(t, "kv_get", "full", `{"key":"k09999"}`); got != `{"key":"k09999","found":true,"value":"new"}` {
		t.Errorf("overwritten value: %s", got)
	}
	if got := e.call(t, "kv_get", "full", `{"key":"one-too-many"}`); got != `{"key":"one-too-many","found":false}` {
		t.Errorf("the refused key was stored: %s", got)
	}
	// Other sessions have their own budget.
	if got := e.call(t, "kv_set", "other", `{"key":"x","value":1}`); got != `{"key":"x","created":true}` {
		t.Errorf("other session: %s", got)
	}
	// Deleting one makes room for one.
	e.call(t, "kv_delete", "full", `{"key":"k00000"}`)
	if got := e.call(t, "kv_set", "full", `{"key":"one-too-many","value":1}`); got != `{"key":"one-too-many","created":true}` {
		t.Errorf("after a delete: %s", got)
	}
	if got := e.call(t, "kv_set", "full", `{"key":"two-too-many","value":1}`); got != want {
		t.Errorf("full again: %s", got)
	}
	var list struct{ Count int }
	json.Unmarshal([]byte(e.call(t, "kv_list", "full", `{"prefix":"k0000"}`)), &list)
	if list.Count != 9 {
		t.Errorf("prefix k0000: %d keys", list.Count)
	}
}

// The store's limits across sessions (issue 25, finding 4): each session
// is a store of its own, so without totals any number of sessions could
// fill memory. Bytes count keys and values; deletes, overwrites and
// dropped sessions give room back.
func TestKV_limitsAcrossSessions(t *testing.T) {
	e := newEnv(t)
	e.kv.SetLimits(tools.KVLimits{MaxKeys: 3, MaxBytes: 40, MaxTotalKeys: 5, MaxTotalBytes: 70})
	set := func(session, key, value string) string {
		return e.call(t, "kv_set", session, `{"key":"`+key+`","value":`+value+`}`)
	}
	// Session a: 3 keys of 1 + 10 bytes.
	for _, k := range []string{"a", "b", "c"} {
		if got := set("a", k, `"12345678"`); got != `{"key":"`+k+`","created":true}` {
			t.Fatalf("a/%s: %s", k, got)
		}
	}
	if got := set("a", "d", "1"); !strings.HasPrefix(got, `tool_failed: kv_set: session "a" already holds 3 keys`) || !strings.HasSuffix(got, `{"limit":"kv.max_keys","max":3}`) {
		t.Errorf("kv.max_keys: %s", got)
	}
	// 33 bytes held; replacing a 10-byte value with an 18-byte one passes 40.
	if got := set("a", "a", `"1234567890123456"`); got != `tool_failed: kv_set: session "a" holds 33 bytes; 8 more would pass kv.max_bytes (40); delete some first | {"limit":"kv.max_bytes","max":40}` {
		t.Errorf("kv.max_bytes: %s", got)
	}
	if got := set("a", "a", `"1234567890123"`); got != `{"key":"a","created":false}` { // 38 bytes
		t.Errorf("within kv.max_bytes: %s", got)
	}
	if keys, bytes := e.kv.Usage(); keys != 3 || bytes != 38 {
		t.Errorf("usage: %d keys, %d bytes", keys, bytes)
	}
	// Session b: 2 keys more reach kv.max_total_keys (5).
	set("b", "x", `"1234567890"`)
	set("b", "y", "1")
	if got := set("b", "z", "1"); got != `tool_failed: kv_set: the store holds 5 keys in all sessions, the most kv.max_total_keys allows; delete keys or end sessions first | {"limit":"kv.max_total_keys","max":5}` {
		t.Errorf("kv.max_total_keys: %s", got)
	}
	// 38 + 13 + 2 = 53 bytes; 20 more in b pass kv.max_total_bytes (70).
	if got := set("b", "y", `"123456789012345678"`); got != `tool_failed: kv_set: the store holds 53 bytes in all sessions; 19 more would pass kv.max_total_bytes (70); delete keys or end sessions first | {"limit":"kv.max_total_bytes","max":70}` {
		t.Errorf("kv.max_total_bytes: %s", got)
	}
	if got := e.call(t, "kv_get", "b", `{"key":"y"}`); got != `{"key":"y","found":true,"value":1}` {
		t.Errorf("a refused write changed the value: %s", got)
	}
	// Ending session a gives its room to b.
	e.kv.DropSession("a")
	if keys, bytes := e.kv.Usage(); keys != 2 || bytes != 15 {
		t.Errorf("usage after a's end: %d keys, %d bytes", keys, bytes)
	}
	if got := set("b", "y", `"123456789012345678"`); got != `{"key":"y","created":false}` {
		t.Errorf("after a's end: %s", got)
	}
	e.call(t, "kv_delete", "b", `{"key":"x"}`)
	if keys, bytes := e.kv.Usage(); keys != 1 || bytes != 21 {
		t.Errorf("usage after a delete: %d keys, %d bytes", keys, bytes)
	}
	e.kv.Reset()
	if keys, bytes := e.kv.Usage(); keys != 0 || bytes != 0 {
		t.Errorf("usage after Reset: %d keys, %d bytes", keys, bytes)
	}
}

// The store's own defaults are the [kv] table's.
func TestKV_defaultsAreTheConfiguration(t *testing.T) {
	c := config.Build(config.Defaults()).KV
	want := tools.KVLimits{MaxKeys: c.MaxKeys, MaxBytes: c.MaxBytes, MaxTotalKeys: int64(c.MaxTotalKeys), MaxTotalBytes: int64(c.MaxTotalBytes)}
	if tools.DefaultKVLimits != want {
		t.Errorf("tools.DefaultKVLimits %+v, the configuration's defaults %+v", tools.DefaultKVLimits, want)
	}
}

// Writers racing a session's end leave the totals what the store holds.
func TestKV_totalsUnderChurn(t *testing.T) {
	e := newEnv(t)
	set, _ := e.reg.Lookup("kv_set")
	del, _ := e.reg.Lookup("kv_delete")
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 2000; i++ {
				session := fmt.Sprintf("s%d", i%3)
				args := []byte(fmt.Sprintf(`{"key":"k%d","value":%d}`, i%50, i))
				set.Execute(context.Background(), toolbox.Call{Session: session, Arguments: args}, specDefaults)
				if i%7 == 0 {
					del.Execute(context.Background(), toolbox.Call{Session: session, Arguments: []byte(fmt.Sprintf(`{"key":"k%d"}`, i%50))}, specDefaults)
				}
				if i%97 == 0 {
					e.kv.DropSession(session)
				}
			}
		}()
	}
	wg.Wait()
	var keys, bytes int64
	for _, session := range []string{"s0", "s1", "s2"} {
		var list struct{ Keys []string }
		json.Unmarshal([]byte(e.call(t, "kv_list", session, `{}`)), &list)
		for _, k := range list.Keys {
			var got struct{ Value json.RawMessage }
			json.Unmarshal([]byte(e.call(t, "kv_get", session, `{"key":"`+k+`"}`)), &got)
			keys++
			bytes += int64(len(k) + len(got.Value))
		}
	}
	if k, b := e.kv.Usage(); k != keys || b != bytes {
		t.Errorf("the totals say %d keys, %d bytes; the store holds %d, %d", k, b, keys, bytes)
	}
}

func TestKV_schemaRefusals(t *testing.T) {
	e := newEnv(t)
	pre := func(tool string) string {
		return fmt.Sprintf(`invalid_args: tool %q: arguments do not match input_schema: `, tool)
	}
	for _, c := range []struct{ tool, args, want string }{
		{"kv_set", `{"key":"a"}`, pre("kv_set") + `at the top: missing property 'value' | [{"pointer":"","message":"missing property 'value'"}]`},
		{"kv_set", `{"value":1}`, pre("kv_set") + `at the top: missing property 'key' | [{"pointer":"","message":"missing property 'key'"}]`},
		{"kv_set", `{"key":1,"value":1}`, pre("kv_set") + `at /key: got number, want string | [{"pointer":"/key","message":"got number, want string"}]`},
		{"kv_set", `{"key":"a","value":1,"ttl":5}`, pre("kv_set") + `at the top: additional properties 'ttl' not allowed | [{"pointer":"","message":"additional properties 'ttl' not allowed"}]`},
		{"kv_get", `{}`, pre("kv_get") + `at the top: missing property 'key' | [{"pointer":"","message":"missing property 'key'"}]`},
		{"kv_delete", `{"key":["a"]}`, pre("kv_delete") + `at /key: got array, want string | [{"pointer":"/key","message":"got array, want string"}]`},
		{"kv_list", `{"prefix":1}`, pre("kv_list") + `at /prefix: got number, want string | [{"pointer":"/prefix","message":"got number, want string"}]`},
		{"kv_list", `{"limit":1}`, pre("kv_list") + `at the top: additional properties 'limit' not allowed | [{"pointer":"","message":"additional properties 'limit' not allowed"}]`},
	} {
		if got := e.call(t, c.tool, "s", c.args); got != c.want {
			t.Errorf("%s(%s)\n got %s\nwant %s", c.tool, c.args, got, c.want)
		}
	}
}

// TestKV_duplicateMembers: the tool must act on the arguments the schema
// validated.
func TestKV_duplicateMembers(t *testing.T) {
	e := newEnv(t)
	got := e.call(t, "kv_set", "s", `{"key":"","key":"a","value":1}`)
	if got != `{"key":"a","created":true}` && !strings.HasPrefix(got, "invalid_args: ") {
		t.Errorf("kv_set: %s", got)
	}
	if list := e.call(t, "kv_list", "s", `{}`); strings.Contains(list, `""`) {
		t.Errorf("an empty key was stored: %s", list)
	}
}

func TestKV_concurrent(t *testing.T) {
	e := newEnv(t)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			own := fmt.Sprint("own", g)
			for i := 0; i < 200; i++ {
				k := fmt.Sprintf(`{"key":"k%d"`, i%20)
				e.call(t, "kv_set", "shared", k+fmt.Sprintf(`,"value":%d}`, g))
				e.call(t, "kv_set", own, k+`,"value":true}`)
				if got := e.call(t, "kv_get", own, k+`}`); !strings.Contains(got, `"found":true,"value":true}`) {
					t.Errorf("own session: %s", got)
					return
				}
				e.call(t, "kv_get", "shared", k+`}`)
				e.call(t, "kv_list", "shared", `{"prefix":"k1"}`)
				if i%3 == 0 {
					e.call(t, "kv_delete", "shared", k+`}`)
				}
			}
		}(g)
	}
	wg.Wait()
	for g := 0; g < 8; g++ {
		if got := e.call(t, "kv_list", fmt.Sprint("own", g), `{}`); !strings.HasSuffix(got, `"count":20}`) {
			t.Errorf("session own%d: %s", g, got)
		}
	}
}

// ---------------------------------------------------------------- math_eval

func mathArgs(src string) string { return `{"expression":` + jstr(src) + `}` }

func TestMathEval_values(t *testing.T) {
	e := newEnv(t)
	for _, c := range []struct{ src, value string }{
		{"1+2", "3"},
		{"1+2*3", "7"},
		{"(1+2)*3", "9"},
		{"2**10", "1024"},
		{"2^10", "1024"},
		{"-2**2", "-4"},
		{"7/2", "3.5"},
		{"6/3", "2"},
		{"7%3", "1"},
		{"-7 % 3", "-1"},
		{"10 - 2 - 3", "5"},
		{"2 * 3 + 4 * 5", "26"},
		{"0.1+0.2", "0.30000000000000004"},
		{"1/3", "0.3333333333333333"},
		{"1e3", "1000"},
		{"1_000_000", "1000000"},
		{"sqrt(16)", "4"},
		{"sqrt(2)", "1.4142135623730951"},
		{"pow(2, 0.5)", "1.4142135623730951"},
		{"pow(2, 10)", "1024"},
		{"abs(-3)", "3"},
		{"abs(-2.5)", "2.5"},
		{"max(1, 5, 3)", "5"},
		{"min(4, 2.5)", "2.5"},
		{"ceil(2.1)", "3"},
		{"floor(-0.5)", "-1"},
		{"round(2.5)", "3"},
		{"exp(0)", "1"},
		{"log(e)", "1"},
		{"log10(1000)", "3"},
		{"log2(8)", "3"},
		{"sin(0)", "0"},
		{"cos(0)", "1"},
		{"atan(1)*4 == pi", "true"},
		{"pi", "3.141592653589793"},
		{"e", "2.718281828459045"},
		{"2*pi", "6.283185307179586"},
		{"1 < 2", "true"},
		{"2 <= 1", "false"},
		{"1 == 1.0", "true"},
		{"3 != 3", "false"},
		{"1 < 2 && 2 < 3", "true"},
		{"not (1 < 2) or false", "false"},
		{"true ? 1 : 2", "1"},
		{"sum([1, 2, 3])", "6"},
		{"mean([1, 2, 3, 4])", "2.5"},
		{"median([3, 1, 2])", "2"},
		{"sum([1, 2, 3, 4, 5, 6, 7, 8, 9, 10])", "55"},
		{"  1 +\n 2  ", "3"},
		{"((((((((((1))))))))))", "1"},
		{strings.Repeat("1+", 90) + "1", "91"},
	} {
		t.Run(c.src, func(t *testing.T) {
			want := `{"expression":` + jstr(c.src) + `,"value":` + c.value + `}`
			if got := e.call(t, "math_eval", "s", mathArgs(c.src)); got != want {
				t.Errorf("\n got %s\nwant %s", got, want)
			}
		})
	}
}

func TestMathEval_refusals(t *testing.T) {
	e := newEnv(t)
	const ia = "invalid_args: math_eval: "
	for _, c := range []struct{ name, src, want string }{
		{"unknown variable", "x", ia + `not allowed in an arithmetic expression: unknown name "x" (only pi and e)`},
		{"unknown variable in an expression", "2 * radius", ia + `not allowed in an arithmetic expression: unknown name "radius" (only pi and e)`},
		{"disabled repeat", `repeat("a", 3)`, ia + `not allowed in an arithmetic expression: unknown name "repeat" (only pi and e)`},
		{"disabled split", `split("a,b", ",")`, ia + `not allowed in an arithmetic expression: unknown name "split" (only pi and e)`},
		{"disabled len", `len("abc")`, ia + `not allowed in an arithmetic expression: unknown name "len" (only pi and e)`},
		{"disabled upper", `upper("a")`, ia + `not allowed in an arithmetic expression: unknown name "upper" (only pi and e)`},
		{"disabled now", "now()", ia + `not allowed in an arithmetic expression: unknown name "now" (only pi and e)`},
		{"disabled date", `date("2020-01-01")`, ia + `not allowed in an arithmetic expression: unknown name "date" (only pi and e)`},
		{"disabled toJSON", "toJSON(1)", ia + `not allowed in an arithmetic expression: unknown name "toJSON" (only pi and e)`},
		{"disabled env access", "getenv(\"HOME\")", ia + `not allowed in an arithmetic expression: unknown name "getenv" (only pi and e)`},
		{"map result", "map([1, 2], # * 2)", ia + `not allowed in an arithmetic expression: loops over collections`},
		{"filter result", "filter([1, 2], # > 1)", ia + `not allowed in an arithmetic expression: loops over collections`},
		{"huge range", "1..100000", ia + `not allowed in an arithmetic expression: operator ..`},
		{"huge range summed", "sum(1..100000)", ia + `not allowed in an arithmetic expression: operator ..`},
		{"too many nodes", strings.Repeat("1+", 200) + "1", ia + "compilation failed: expression exceeds maximum allowed nodes (1:202) | " + strings.Repeat("1+", 200) + "1 | " + strings.Repeat(".", 201) + "^"},
		{"deep unary nesting", strings.Repeat("-(", 250) + "1" + strings.Repeat(")", 250), ia + "compilation failed: expression exceeds maximum allowed nodes (1:702) | -(-(…"},
		{"division by zero", "1/0", ia + "the result is not a finite number (+Inf)"},
		{"negative infinity", "-1/0", ia + "the result is not a finite number (-Inf)"},
		{"NaN", "0/0", ia + "the result is not a finite number (NaN)"},
		{"sqrt of negative", "sqrt(-1)", ia + "the result is not a finite number (NaN)"},
		{"log of zero", "log(0)", ia + "the result is not a finite number (-Inf)"},
		{"overflow to Inf", "2**100000", ia + "the result is not a finite number (+Inf)"},
		{"integer modulo by zero", "1 % 0", ia + `the result is not a finite number (NaN)`},
		{"float literal out of range", "1e400", ia + `invalid float literal: strconv.ParseFloat: parsing "1e400": value out of range (1:5) | 1e400 | ....^`},
		{"string result", `"abc"`, ia + `not allowed in an arithmetic expression: strings`},
		{"concatenated string", `"a" + "b"`, ia + `not allowed in an arithmetic expression: strings`},
		{"nil result", "nil", ia + `not allowed in an arithmetic expression: this syntax`},
		{"array result", "[1, 2]", ia + "the result must be a number or a boolean, not []interface {}"},
		{"map literal result", "{a: 1}", ia + `not allowed in an arithmetic expression: strings`},
		{"environment result", "$env", ia + `not allowed in an arithmetic expression: unknown name "$env" (only pi and e)`},
		{"string to sqrt", `sqrt("x")`, ia + `not allowed in an arithmetic expression: strings`},
		{"string to abs", `abs("x")`, ia + `not allowed in an arithmetic expression: strings`},
		{"no arguments to max", "max()", ia + "not enough arguments to call max (1:1) | max() | ^"},
		{"syntax error", "1 +", ia + "unexpected token EOF (1:3) | 1 + | ..^"},
		{"unbalanced", "(1 + 2", ia + "unexpected token EOF (1:6) | (1 + 2 | .....^"},
		{"assignment", "pi = 3", ia + `unexpected token Operator("=") (1:4) | pi = 3 | ...^`},
		{"method call", `"abc".Len()`, ia + `not allowed in an arithmetic expression: strings`},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := e.call(t, "math_eval", "s", mathArgs(c.src))
			if prefix, ok := strings.CutSuffix(c.want, "…"); ok {
				if !strings.HasPrefix(got, prefix) {
					t.Errorf("\n got %.300s\nwant %s…", got, prefix)
				}
				return
			}
			if got != c.want {
				t.Errorf("\n got %s\nwant %s", got, c.want)
			}
		})
	}
}

func TestMathEval_sourceLimit(t *testing.T) {
	e := newEnv(t)
	ok := strings.Repeat(" ", 998) + "42" // 1000 bytes
	if got := e.call(t, "math_eval", "s", mathArgs(ok)); got != `{"expression":`+jstr(ok)+`,"value":42}` {
		t.Errorf("1000 bytes: %.100s", got)
	}
	long := strings.Repeat(" ", 999) + "42" // 1001 bytes
	want := `invalid_args: tool "math_eval": arguments do not match input_schema: at /expression: maxLength: got 1,001, want 1,000 | [{"pointer":"/expression","message":"maxLength: got 1,001, want 1,000"}]`
	if got := e.call(t, "math_eval", "s", mathArgs(long)); got != want {
		t.Errorf("1001 bytes\n got %s\nwant %s", got, want)
	}
	if got := e.call(t, "math_eval", "s", mathArgs("")); got != `invalid_args: tool "math_eval": arguments do not match input_schema: at /expression: minLength: got 0, want 1 | [{"pointer":"/expression","message":"minLength: got 0, want 1"}]` {
		t.Errorf("empty: %s", got)
	}
	// maxLength counts characters; the tool itself counts bytes.
	wide := strings.Repeat("é", 600) // 600 characters, 1200 bytes
	if got, want := e.call(t, "math_eval", "s", mathArgs(wide)), `invalid_args: math_eval: the expression is 1200 bytes, more than the 1000 allowed`; got != want {
		t.Errorf("\n got %s\nwant %s", got, want)
	}
	// Without the schema (a caller that skips Validate), the tool still refuses.
	m := builtin(t, "math_eval")
	_, _, perr := m.Execute(context.Background(), toolbox.Call{Arguments: []byte(mathArgs(strings.Repeat("1+", 5000) + "1"))}, specDefaults)
	if perr == nil || errString(perr) != `invalid_args: math_eval: the expression is 10001 bytes, more than the 1000 allowed` {
		t.Errorf("unvalidated long source: %v", perr)
	}
	if got := e.call(t, "math_eval", "s", `{"expression":1}`); !strings.HasPrefix(got, `invalid_args: tool "math_eval": arguments do not match input_schema: at /expression: got number, want string`) {
		t.Errorf("number: %s", got)
	}
	if got := e.call(t, "math_eval", "s", `{"expression":"1","vars":{}}`); !strings.HasPrefix(got, `invalid_args: tool "math_eval": arguments do not match input_schema: at the top: additional properties 'vars' not allowed`) {
		t.Errorf("extra argument: %s", got)
	}
}

// TestMathEval_cpuBound: no expression within the source and node caps may
// run for long (math_eval is inline: no timeout_ms applies to it).
func TestMathEval_cpuBound(t *testing.T) {
	e := newEnv(t)
	done := make(chan string, 1)
	src := "let a = 1..999; count(a, count(a, count(a, count(a, true) > 0) > 0) > 0)"
	go func() { done <- e.call(t, "math_eval", "s", mathArgs(src)) }()
	select {
	case got := <-done:
		if !strings.HasPrefix(got, "invalid_args: math_eval: ") {
			t.Errorf("got %s", got)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("math_eval still running after 2 s")
	}
}

// TestMathEval_integerOverflow: integer arithmetic must not silently wrap.
func TestMathEval_integerOverflow(t *testing.T) {
	e := newEnv(t)
	for _, c := range []struct {
		src  string
		want float64
	}{
		{"9223372036854775807 + 1", 9223372036854775808},
		{"9223372036854775807 * 2", 18446744073709551614},
		{"-9223372036854775807 - 2", -9223372036854775809},
	} {
		got := e.call(t, "math_eval", "s", mathArgs(c.src))
		if strings.HasPrefix(got, "invalid_args: ") {
			continue // refusing is fine too
		}
		var v struct{ Value float64 }
		if err := json.Unmarshal([]byte(got), &v); err != nil || math.Abs(v.Value-c.want) > math.Abs(c.want)*1e-9 {
			t.Errorf("%s = %s", c.src, got)
		}
	}
}

func TestMathEval_concurrent(t *testing.T) {
	e := newEnv(t)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				src := fmt.Sprintf("%d * %d + sqrt(%d)", g, i, i*i)
				want := fmt.Sprintf(`{"expression":%q,"value":%d}`, src, g*i+i)
				if got := e.call(t, "math_eval", "s", mathArgs(src)); got != want {
					t.Errorf("\n got %s\nwant %s", got, want)
					return
				}
				if got := e.call(t, "math_eval", "s", mathArgs("nope")); !strings.HasPrefix(got, "invalid_args: ") {
					t.Errorf("got %s", got)
					return
				}
			}
		}(g)
	}
	wg.Wait()
}

// ---------------------------------------------------------------- tools_list

// addHostTools registers host tools next to the built-ins.
func addHostTools(t *testing.T, e *env) {
	t.Helper()
	run := func(context.Context, toolbox.Call) ([]byte, error) { return []byte(`{}`), nil }
	for _, text := range []string{
		`{"name":"get_weather","description":"Current weather by city and country code.",
		  "input_schema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false},
		  "returns":"json","capabilities":["network"],"limits":{"timeout_ms":1000,"rate_per_min":20}}`,
		`{"name":"noschema","description":"No schema."}`,
		`{"name":"trueschema","description":"Schema true.","input_schema":true}`,
		`{"name":"emptyschema","description":"Schema {}.","input_schema":{ }}`,
		`{"name":"hidden","description":"Not for LLMs.","llm_visible":false,"returns":"string"}`,
	} {
		d, err := toolbox.ParseDescriptor([]byte(text))
		if err != nil {
			t.Fatal(err)
		}
		tl, err := toolbox.NewTool(d, toolbox.ToolOptions{Run: run})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.reg.Register(tl); err != nil {
			t.Fatal(err)
		}
	}
}

func onlyTools(names ...string) toolbox.Scope {
	return toolbox.Scope{Request: toolbox.NewPolicy("the request", names, nil)}
}

func TestToolsList_exactFormats(t *testing.T) {
	e := newEnv(t)
	addHostTools(t, e)
	scope := onlyTools("get_weather", "noschema")
	weatherSchema := `{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}`
	empty := `{"type":"object","properties":{}}`
	for _, c := range []struct{ args, want string }{
		{`{}`, `{"format":"clara","tools":[` +
			`{"name":"get_weather","description":"Current weather by city and country code.","input_schema":` + weatherSchema +
			`,"returns":"json","capabilities":["network"],"limits":{"timeout_ms":1000,"rate_per_min":20,"rate_scope":"tool"},"llm_visible":true,"builtin":false},` +
			`{"name":"noschema","description":"No schema.","returns":"json","capabilities":[],"limits":{"rate_scope":"tool"},"llm_visible":true,"builtin":false}]}`},
		{`{"format":"openai"}`, `{"format":"openai","tools":[` +
			`{"type":"function","function":{"name":"get_weather","description":"Current weather by city and country code.","parameters":` + weatherSchema + `,"strict":true}},` +
			`{"type":"function","function":{"name":"noschema","description":"No schema.","parameters":` + empty + `}}]}`},
		{`{"format":"anthropic"}`, `{"format":"anthropic","tools":[` +
			`{"name":"get_weather","description":"Current weather by city and country code.","input_schema":` + weatherSchema + `},` +
			`{"name":"noschema","description":"No schema.","input_schema":` + empty + `}]}`},
		{`{"format":"mcp"}`, `{"format":"mcp","tools":[` +
			`{"name":"get_weather","description":"Current weather by city and country code.","inputSchema":` + weatherSchema +
			`,"annotations":{"readOnlyHint":false,"destructiveHint":false,"idempotentHint":false,"openWorldHint":true}},` +
			`{"name":"noschema","description":"No schema.","inputSchema":` + empty +
			`,"annotations":{"readOnlyHint":true,"idempotentHint":false,"openWorldHint":false}}]}`},
	} {
		if got := e.run(t, "tools_list", "s", c.args, scope); got != c.want {
			t.Errorf("tools_list(%s)\n got %s\nwant %s", c.args, got, c.want)
		}
	}
}

// catalogEntry checks one entry of an LLM format against its published
// shape and returns its name and schema.
func catalogEntry(t *testing.T, format string, raw json.RawMessage) (string, map[string]any) {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("%s entry %s: %v", format, raw, err)
	}
	keys := func(m map[string]json.RawMessage) string {
		var ks []string
		for k := range m {
			ks = append(ks, k)
		}
		sort.Strings(ks)
		return strings.Join(ks, ",")
	}
	var fields map[string]json.RawMessage
	var schemaKey string
	switch format {
	case "openai": // {"type":"function","function":{"name","description","parameters"}}
		if keys(m) != "function,type" || string(m["type"]) != `"function"` {
			t.Fatalf("openai entry %s", raw)
		}
		json.Unmarshal(m["function"], &fields)
		schemaKey = "parameters"
	case "anthropic": // {"name","description","input_schema"}
		fields, schemaKey = m, "input_schema"
	case "mcp": // {"name","description","inputSchema"}
		fields, schemaKey = m, "inputSchema"
	}
	// The optional members each format may carry: OpenAI's strict, MCP's
	// title, outputSchema and annotations (always).
	optional := map[string]bool{"strict": format == "openai", "title": format == "mcp", "outputSchema": format == "mcp"}
	var present []string
	for k := range fields {
		if !optional[k] {
			present = append(present, k)
		}
	}
	sort.Strings(present)
	wantKeys := []string{"description", "name", schemaKey}
	if format == "mcp" {
		wantKeys = append(wantKeys, "annotations")
	}
	sort.Strings(wantKeys)
	if got, want := strings.Join(present, ","), strings.Join(wantKeys, ","); got != want {
		t.Fatalf("%s entry keys %s, want %s: %s", format, got, want, raw)
	}
	var name, desc string
	if json.Unmarshal(fields["name"], &name) != nil || json.Unmarshal(fields["description"], &desc) != nil || !toolbox.ValidName(name) {
		t.Fatalf("%s entry name/description: %s", format, raw)
	}
	var schema map[string]any
	if err := json.Unmarshal(fields[schemaKey], &schema); err != nil {
		t.Fatalf("%s %s: %s is not an object: %s", format, name, schemaKey, fields[schemaKey])
	}
	return name, schema
}

func catalog(t *testing.T, e *env, args string, scope toolbox.Scope) (string, []json.RawMessage) {
	t.Helper()
	out := e.run(t, "tools_list", "s", args, scope)
	var v struct {
		Format string
		Tools  []json.RawMessage
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("tools_list(%s) = %s", args, out)
	}
	return v.Format, v.Tools
}

func TestToolsList_publishedShapes(t *testing.T) {
	e := newEnv(t)
	addHostTools(t, e)
	all := []string{"audit_reopen", "audit_tail", "echo", "emptyschema", "get_time", "get_weather", "hidden", "kv_delete", "kv_get", "kv_list", "kv_set",
		"math_eval", "noschema", "notifications_drain", "session_policy", "tool_limits", "tools_list", "trueschema"}
	for _, format := range []string{"openai", "anthropic", "mcp"} {
		t.Run(format, func(t *testing.T) {
			// LLM formats default to llm_visible tools only: ask for all.
			f, entries := catalog(t, e, `{"format":"`+format+`","llm_visible_only":false}`, toolbox.Scope{})
			if f != format {
				t.Errorf("format %q", f)
			}
			var names []string
			for _, raw := range entries {
				name, schema := catalogEntry(t, format, raw)
				names = append(names, name)
				if schema["type"] != "object" {
					t.Errorf("%s: schema type %v", name, schema["type"])
				}
				switch name {
				case "echo", "noschema", "trueschema", "emptyschema", "hidden":
					if b, _ := json.Marshal(schema); string(b) != `{"properties":{},"type":"object"}` {
						t.Errorf("%s: schema %s", name, b)
					}
				}
			}
			if !reflect.DeepEqual(names, all) {
				t.Errorf("names\n got %v\nwant %v", names, all)
			}
		})
	}
	// The clara format: descriptors plus builtin, sorted by name.
	_, entries := catalog(t, e, `{"format":"clara"}`, toolbox.Scope{})
	var names []string
	for _, raw := range entries {
		var d struct {
			toolbox.Descriptor
			Builtin *bool `json:"builtin"`
		}
		dec := json.NewDecoder(strings.NewReader(string(raw)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&d); err != nil || d.Builtin == nil {
			t.Fatalf("clara entry %s: %v", raw, err)
		}
		if *d.Builtin != (d.Name != "get_weather" && d.Name != "noschema" && d.Name != "trueschema" && d.Name != "emptyschema" && d.Name != "hidden") {
			t.Errorf("%s: builtin %v", d.Name, *d.Builtin)
		}
		names = append(names, d.Name)
	}
	if !reflect.DeepEqual(names, all) {
		t.Errorf("clara names %v", names)
	}
}

// TestToolsList_schemaWithoutType: a valid input_schema that does not say
// "type":"object" must still reach the LLM formats as an object schema
// (OpenAI refuses function parameters that are not type object).
// TestToolsList_titleOutputSchemaStrict: what agent frameworks expect of
// a catalog (issue 13): MCP's title and outputSchema from the descriptor,
// OpenAI's strict only when the schema allows it.
func TestToolsList_titleOutputSchemaStrict(t *testing.T) {
	e := newEnv(t)
	d, err := toolbox.ParseDescriptor([]byte(`{"name":"add","title":"Add two numbers","idempotent":true,` +
		`"input_schema":{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"}},"required":["a"],"additionalProperties":false},` +
		`"output_schema":{"type":"object","properties":{"sum":{"type":"number"}},"required":["sum"]}}`))
	if err != nil {
		t.Fatal(err)
	}
	tl, _ := toolbox.NewTool(d, toolbox.ToolOptions{Run: func(context.Context, toolbox.Call) ([]byte, error) { return nil, nil }})
	e.reg.Register(tl)
	_, entries := catalog(t, e, `{"format":"mcp"}`, onlyTools("add"))
	if got := string(entries[0]); !strings.Contains(got, `"title":"Add two numbers"`) || !strings.Contains(got, `"outputSchema":{"type":"object"`) ||
		!strings.Contains(got, `"idempotentHint":true`) {
		t.Fatalf("mcp: %s", got)
	}
	_, entries = catalog(t, e, `{"format":"openai"}`, onlyTools("add"))
	if strings.Contains(string(entries[0]), `"strict"`) {
		t.Fatalf("strict with an optional property: %s", entries[0])
	}
	if _, err := toolbox.ParseDescriptor([]byte(`{"name":"x","output_schema":[1]}`)); err == nil {
		t.Fatal("an output_schema that is not an object was accepted")
	}
}

func TestToolsList_schemaWithoutType(t *testing.T) {
	e := newEnv(t)
	d, _ := toolbox.ParseDescriptor([]byte(`{"name":"typeless","input_schema":{"properties":{"city":{"type":"string"}},"required":["city"]}}`))
	tl, err := toolbox.NewTool(d, toolbox.ToolOptions{Run: func(context.Context, toolbox.Call) ([]byte, error) { return nil, nil }})
	if err != nil {
		t.Fatal(err)
	}
	e.reg.Register(tl)
	for _, format := range []string{"openai", "anthropic", "mcp"} {
		_, entries := catalog(t, e, `{"format":"`+format+`"}`, onlyTools("typeless"))
		if len(entries) != 1 {
			t.Fatalf("%d entries", len(entries))
		}
		if _, schema := catalogEntry(t, format, entries[0]); schema["type"] != "object" {
			t.Errorf("%s: schema %v", format, schema)
		}
	}
}

func TestToolsList_filtering(t *testing.T) {
	e := newEnv(t)
	addHostTools(t, e)
	names := func(args string, scope toolbox.Scope) string {
		_, entries := catalog(t, e, args, scope)
		var out []string
		for _, raw := range entries {
			var v struct {
				Name     string
				Function struct{ Name string }
			}
			json.Unmarshal(raw, &v)
			out = append(out, v.Name+v.Function.Name)
		}
		return strings.Join(out, ",")
	}
	for _, c := range []struct {
		name, args string
		scope      toolbox.Scope
		want       string
	}{
		{"llm_visible_only", `{"llm_visible_only":true}`, toolbox.Scope{},
			"echo,emptyschema,get_time,get_weather,kv_delete,kv_get,kv_list,kv_set,math_eval,noschema,notifications_drain,trueschema"},
		{"llm_visible_only false", `{"llm_visible_only":false,"format":"mcp"}`, onlyTools("hidden", "tools_list", "echo"), "echo,hidden,tools_list"},
		{"config deny", `{"format":"openai","llm_visible_only":false}`, toolbox.Scope{Config: toolbox.NewPolicy("the configuration", nil, []string{"echo", "kv_set", "get_weather"})},
			"audit_reopen,audit_tail,emptyschema,get_time,hidden,kv_delete,kv_get,kv_list,math_eval,noschema,notifications_drain,session_policy,tool_limits,tools_list,trueschema"},
		{"LLM formats default to llm_visible", `{"format":"openai"}`, toolbox.Scope{Config: toolbox.NewPolicy("the configuration", nil, []string{"echo", "kv_set", "get_weather"})},
			"emptyschema,get_time,kv_delete,kv_get,kv_list,math_eval,noschema,notifications_drain,trueschema"},
		{"session allow", `{"format":"anthropic"}`, toolbox.Scope{Session: toolbox.NewPolicy(`session "s"`, []string{"kv_get", "kv_set", "nonexistent"}, nil)},
			"kv_get,kv_set"},
		{"layers combine", `{"llm_visible_only":true}`, toolbox.Scope{
			Config:  toolbox.NewPolicy("the configuration", nil, []string{"echo"}),
			Session: toolbox.NewPolicy(`session "s"`, []string{"echo", "kv_get", "audit_tail", "math_eval"}, nil),
			Request: toolbox.NewPolicy("the request", nil, []string{"math_eval"})}, "kv_get"},
		{"everything denied", `{"format":"mcp"}`, onlyTools("nothing"), ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := names(c.args, c.scope); got != c.want {
				t.Errorf("\n got %s\nwant %s", got, c.want)
			}
		})
	}
	if got := e.run(t, "tools_list", "s", `{"format":"mcp"}`, onlyTools("nothing")); got != `{"format":"mcp","tools":[]}` {
		t.Errorf("empty catalog: %s", got)
	}
}

func TestToolsList_badArguments(t *testing.T) {
	e := newEnv(t)
	pre := `invalid_args: tool "tools_list": arguments do not match input_schema: `
	for _, c := range []struct{ args, want string }{
		{`{"format":"xml"}`, pre + `at /format: value must be one of 'clara', 'openai', 'anthropic', 'mcp' | [{"pointer":"/format","message":"value must be one of 'clara', 'openai', 'anthropic', 'mcp'"}]`},
		{`{"format":"OpenAI"}`, pre + `at /format: value must be one of 'clara', 'openai', 'anthropic', 'mcp' | [{"pointer":"/format","message":"value must be one of 'clara', 'openai', 'anthropic', 'mcp'"}]`},
		{`{"llm_visible_only":"yes"}`, pre + `at /llm_visible_only: got string, want boolean | [{"pointer":"/llm_visible_only","message":"got string, want boolean"}]`},
		{`{"filter":"x"}`, pre + `at the top: additional properties 'filter' not allowed | [{"pointer":"","message":"additional properties 'filter' not allowed"}]`},
	} {
		if got := e.call(t, "tools_list", "s", c.args); got != c.want {
			t.Errorf("tools_list(%s)\n got %s\nwant %s", c.args, got, c.want)
		}
	}
	_, err := tools.Catalog(e.reg, toolbox.Scope{}, "xml", false)
	if err == nil || err.Error() != `invalid_args: tools_list: unknown format "xml" (clara, openai, anthropic, mcp)` {
		t.Errorf("Catalog(xml): %v", err)
	}
}

// TestCatalog_unknownFormatWhateverTheTools: an unknown format is an error
// even when no tool is listed.
func TestCatalog_unknownFormatWhateverTheTools(t *testing.T) {
	for _, c := range []struct {
		name  string
		reg   *toolbox.Registry
		scope toolbox.Scope
	}{
		{"empty registry", toolbox.NewRegistry(), toolbox.Scope{}},
		{"all denied", newEnv(t).reg, onlyTools("nothing")},
	} {
		out, err := tools.Catalog(c.reg, c.scope, "xml", false)
		if err == nil {
			t.Errorf("%s: %s", c.name, out)
		}
	}
}

// ---------------------------------------------------------------- audit_tail

func TestAuditTail(t *testing.T) {
	e := newEnv(t)
	var recs []toolbox.Record
	for i := 1; i <= 30; i++ {
		r := toolbox.Record{Time: fixedNow.Add(time.Duration(i) * time.Second), Session: fmt.Sprint("s", i), Tool: "echo", Duration: time.Duration(i) * time.Millisecond}
		if i%2 == 0 {
			r.Code = protocol.ToolFailed
		}
		args := []byte(fmt.Sprintf(`{"i":%d}`, i))
		r.Decision = e.audit.Reserve()
		e.audit.Add(r, args)
		r.ArgsSHA256 = sha256.Sum256(args)
		recs = append(recs, r)
	}
	want := func(from, to int) string {
		var b []byte
		b = append(b, `{"records":[`...)
		for i := from; i <= to; i++ {
			if i > from {
				b = append(b, ',')
			}
			b = recs[i-1].AppendJSON(b)
		}
		return string(append(b, "]}"...))
	}
	for _, c := range []struct{ args, want string }{
		{`{}`, want(11, 30)},
		{`{"n":1}`, want(30, 30)},
		{`{"n":5}`, want(26, 30)},
		{`{"n":30}`, want(1, 30)},
		{`{"n":1000}`, want(1, 30)},
	} {
		if got := e.call(t, "audit_tail", "s", c.args); got != c.want {
			t.Errorf("audit_tail(%s)\n got %.300s\nwant %.300s", c.args, got, c.want)
		}
	}
	sum := sha256.Sum256([]byte(`{"i":30}`))
	if !strings.Contains(want(30, 30), `{"ts":"2023-11-14T22:13:50.123456Z","session":"s30","tool":"echo","args_sha256":"`+hex.EncodeToString(sum[:])+`","duration_us":30000,"status":"error","error":"tool_failed","decision_id":"`+recs[29].Decision.String()+`"}`) {
		t.Errorf("record shape: %s", want(30, 30))
	}
	pre := `invalid_args: tool "audit_tail": arguments do not match input_schema: `
	for _, c := range []struct{ args, want string }{
		{`{"n":0}`, pre + `at /n: minimum: got 0, want 1 | [{"pointer":"/n","message":"minimum: got 0, want 1"}]`},
		{`{"n":-5}`, pre + `at /n: minimum: got -5, want 1 | [{"pointer":"/n","message":"minimum: got -5, want 1"}]`},
		{`{"n":1001}`, pre + `at /n: maximum: got 1,001, want 1,000 | [{"pointer":"/n","message":"maximum: got 1,001, want 1,000"}]`},
		{`{"n":1.5}`, pre + `at /n: got number, want integer | [{"pointer":"/n","message":"got number, want integer"}]`},
		{`{"n":"5"}`, pre + `at /n: got string, want integer | [{"pointer":"/n","message":"got string, want integer"}]`},
		{`{"count":5}`, pre + `at the top: additional properties 'count' not allowed | [{"pointer":"","message":"additional properties 'count' not allowed"}]`},
	} {
		if got := e.call(t, "audit_tail", "s", c.args); got != c.want {
			t.Errorf("audit_tail(%s)\n got %s\nwant %s", c.args, got, c.want)
		}
	}
	empty := newEnv(t)
	if got := empty.call(t, "audit_tail", "s", `{}`); got != `{"records":[]}` {
		t.Errorf("empty audit: %s", got)
	}
}

// TestAuditTail_maxUnderDefaults: the documented maximum n=1000 works under
// the default max_output_bytes.
func TestAuditTail_maxUnderDefaults(t *testing.T) {
	e := newEnv(t)
	for i := 0; i < 1500; i++ {
		e.audit.Add(toolbox.Record{Time: fixedNow, Session: "default", Tool: "kv_set", Duration: time.Millisecond}, []byte(`{"key":"k","value":1}`))
	}
	got := e.call(t, "audit_tail", "s", `{"n":1000}`)
	var v struct{ Records []json.RawMessage }
	if err := json.Unmarshal([]byte(got), &v); err != nil || len(v.Records) != 1000 {
		t.Errorf("audit_tail(1000): %.200s", got)
	}
}

// ---------------------------------------------------------------- session_policy

func TestSessionPolicy_narrows(t *testing.T) {
	e := newEnv(t)
	steps := []struct{ session, args, want string }{
		{"s", `{"allow":["kv_get","kv_set","echo"]}`, `{"session":"s","allow":["echo","kv_get","kv_set"],"deny":[]}`},
		{"s", `{"allow":["kv_get","kv_set","math_eval"],"deny":["kv_set"]}`, `{"session":"s","allow":["kv_get","kv_set"],"deny":["kv_set"]}`},
		{"s", `{}`, `{"session":"s","allow":["kv_get","kv_set"],"deny":["kv_set"]}`},
		{"s", `{"allow":[]}`, `{"session":"s","allow":["kv_get","kv_set"],"deny":["kv_set"]}`},
		{"s", `{"deny":["echo"]}`, `{"session":"s","allow":["kv_get","kv_set"],"deny":["echo","kv_set"]}`},
		// Trying to widen: the allow list only shrinks.
		{"s", `{"allow":["echo","math_eval"]}`, `{"session":"s","allow":[],"deny":["echo","kv_set"]}`},
		// Another session is untouched.
		{"t", `{}`, `{"session":"t","allow":null,"deny":[]}`},
		{"t", `{"deny":["audit_tail"]}`, `{"session":"t","allow":null,"deny":["audit_tail"]}`},
	}
	for i, s := range steps {
		if got := e.call(t, "session_policy", s.session, s.args); got != s.want {
			t.Errorf("step %d: session_policy(%s) in %s\n got %s\nwant %s", i, s.args, s.session, got, s.want)
		}
	}
	sp := e.sessions.Policy("s")
	for _, name := range []string{"echo", "kv_get", "kv_set", "math_eval"} {
		if (toolbox.Scope{Session: sp}).Allows(name) {
			t.Errorf("session s still allows %s", name)
		}
	}
	if tp := e.sessions.Policy("t"); !(toolbox.Scope{Session: tp}).Allows("echo") || (toolbox.Scope{Session: tp}).Allows("audit_tail") {
		t.Error("session t policy wrong")
	}
	pre := `invalid_args: tool "session_policy": arguments do not match input_schema: `
	for _, c := range []struct{ args, want string }{
		{`{"allow":"echo"}`, pre + `at /allow: got string, want array | [{"pointer":"/allow","message":"got string, want array"}]`},
		{`{"deny":[1]}`, pre + `at /deny/0: got number, want string | [{"pointer":"/deny/0","message":"got number, want string"}]`},
		{`{"widen":true}`, pre + `at the top: additional properties 'widen' not allowed | [{"pointer":"","message":"additional properties 'widen' not allowed"}]`},
	} {
		if got := e.call(t, "session_policy", "s", c.args); got != c.want {
			t.Errorf("session_policy(%s)\n got %s\nwant %s", c.args, got, c.want)
		}
	}
}
