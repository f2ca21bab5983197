package state_test

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/clara-lib/clara/core/state"
)

// stores runs f against an in-memory store and a file store.
func stores(t *testing.T, f func(t *testing.T, s *state.Store)) {
	t.Helper()
	t.Run("memory", func(t *testing.T) { f(t, openStore(t, "")) })
	t.Run("file", func(t *testing.T) { f(t, openStore(t, filepath.Join(t.TempDir(), "state.db"))) })
}

func openStore(t *testing.T, path string) *state.Store {
	t.Helper()
	s, err := state.Open(path)
	if err != nil {
		t.Fatalf("Open(%q): %v", path, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func apply(t *testing.T, s *state.Store, writes ...state.Write) {
	t.Helper()
	if err := s.Apply(writes); err != nil {
		t.Fatalf("Apply: %v", err)
	}
}

func set(scope, key, value string) state.Write {
	return state.Write{Scope: scope, Key: key, Value: []byte(value)}
}

func del(scope, key string) state.Write { return state.Write{Scope: scope, Key: key} }

func decode(t *testing.T, text string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(text), &v); err != nil {
		t.Fatalf("decode %s: %v", text, err)
	}
	return v
}

func mustGet(t *testing.T, s *state.Store, scope, key string) (string, bool) {
	t.Helper()
	v, ok, err := s.Get(scope, key)
	if err != nil {
		t.Fatalf("Get(%q, %q): %v", scope, key, err)
	}
	return string(v), ok
}

func mustScope(t *testing.T, s *state.Store, scope string) map[string]any {
	t.Helper()
	m, err := s.Scope(scope)
	if err != nil {
		t.Fatalf("Scope(%q): %v", scope, err)
	}
	return m
}

func mustKeys(t *testing.T, s *state.Store, scope string) []string {
	t.Helper()
	k, err := s.Keys(scope)
	if err != nil {
		t.Fatalf("Keys(%q): %v", scope, err)
	}
	return k
}

// jsonCases covers every JSON type; in is what is written, out the stored
// compact text.
var jsonCases = []struct{ key, in, out string }{
	{"null", `null`, `null`},
	{"true", `true`, `true`},
	{"false", ` false `, `false`},
	{"zero", `0`, `0`},
	{"int", `-42`, `-42`},
	{"float", `3.25`, `3.25`},
	{"exp", `1e3`, `1e3`},
	{"big", `12345678901234567890`, `12345678901234567890`},
	{"string", `"hello"`, `"hello"`},
	{"unicode", `"h\u00e9 ✓ \"q\""`, `"h\u00e9 ✓ \"q\""`},
	{"empty-string", `""`, `""`},
	{"array", `[1, "a", null, true, [2]]`, `[1,"a",null,true,[2]]`},
	{"empty-array", `[ ]`, `[]`},
	{"object", "{ \"a\" : {\"b\": [1, 2.5]},\n \"c\": null }", `{"a":{"b":[1,2.5]},"c":null}`},
	{"empty-object", `{}`, `{}`},
}

func TestRoundTripTypes(t *testing.T) {
	stores(t, func(t *testing.T, s *state.Store) {
		// Half the keys are read before the scope is cached, half after.
		var writes []state.Write
		for _, c := range jsonCases {
			writes = append(writes, set("s1", c.key, c.in))
		}
		apply(t, s, writes...)

		var want []string
		for _, c := range jsonCases {
			want = append(want, c.key)
			got, ok := mustGet(t, s, "s1", c.key)
			if !ok || got != c.out {
				t.Errorf("Get(%s) uncached = %q, %v; want %q", c.key, got, ok, c.out)
			}
		}
		slices.Sort(want)
		if got := mustKeys(t, s, "s1"); !slices.Equal(got, want) {
			t.Errorf("Keys uncached = %v, want %v", got, want)
		}

		m := mustScope(t, s, "s1")
		if len(m) != len(jsonCases) {
			t.Errorf("Scope has %d keys, want %d", len(m), len(jsonCases))
		}
		for _, c := range jsonCases {
			if w := decode(t, c.in); !reflect.DeepEqual(m[c.key], w) {
				t.Errorf("Scope[%s] = %#v, want %#v", c.key, m[c.key], w)
			}
			got, ok := mustGet(t, s, "s1", c.key)
			if !ok || got != c.out {
				t.Errorf("Get(%s) cached = %q, %v; want %q", c.key, got, ok, c.out)
			}
		}
		if got := mustKeys(t, s, "s1"); !slices.Equal(got, want) {
			t.Errorf("Keys cached = %v, want %v", got, want)
		}
		if _, ok := m["int"].(float64); !ok {
			t.Errorf("numbers decode as %T, want float64", m["int"])
		}

		// Overwrite through the cache.
		apply(t, s, set("s1", "int", `7`), set("s1", "new", `{"x":1}`))
		m = mustScope(t, s, "s1")
		if m["int"] != 7.0 || !reflect.DeepEqual(m["new"], map[string]any{"x": 1.0}) {
			t.Errorf("after overwrite: int=%v new=%v", m["int"], m["new"])
		}
		if got, _ := mustGet(t, s, "s1", "int"); got != "7" {
			t.Errorf("Get(int) = %q after overwrite", got)
		}

		// Missing things.
		if _, ok := mustGet(t, s, "s1", "nope"); ok {
			t.Error("Get of a missing key reports ok")
		}
		if _, ok := mustGet(t, s, "other", "int"); ok {
			t.Error("Get in another scope reports ok")
		}
		if m := mustScope(t, s, "other"); m == nil || len(m) != 0 {
			t.Errorf("Scope(other) = %v, want empty non-nil", m)
		}
		if k := mustKeys(t, s, "other"); k == nil || len(k) != 0 {
			t.Errorf("Keys(other) = %v, want empty", k)
		}
		if m := mustScope(t, s, ""); len(m) != 0 {
			t.Errorf("Scope(\"\") = %v", m)
		}
	})
}

func TestDuplicateKeyInBatchLastWins(t *testing.T) {
	stores(t, func(t *testing.T, s *state.Store) {
		mustScope(t, s, "s") // cached
		apply(t, s, set("s", "k", `1`), set("s", "k", `2`), del("s", "gone"), set("s", "gone", `3`), del("s", "gone"))
		if m := mustScope(t, s, "s"); !reflect.DeepEqual(m, map[string]any{"k": 2.0}) {
			t.Errorf("cached Scope = %v", m)
		}
		if got, ok := mustGet(t, s, "s", "k"); !ok || got != "2" {
			t.Errorf("Get = %q, %v", got, ok)
		}
		if err := s.DropScope("s"); err != nil {
			t.Fatal(err)
		}
		apply(t, s, set("s", "k", `1`), set("s", "k", `2`))
		if got, ok := mustGet(t, s, "s", "k"); !ok || got != "2" {
			t.Errorf("uncached Get = %q, %v", got, ok)
		}
	})
}

func TestDelete(t *testing.T) {
	stores(t, func(t *testing.T, s *state.Store) {
		apply(t, s, set("s", "a", `1`), set("s", "b", `2`), set("t", "a", `3`))
		before := mustScope(t, s, "s")
		apply(t, s, del("s", "a"), del("s", "never-there"))
		if _, ok := mustGet(t, s, "s", "a"); ok {
			t.Error("deleted key still there")
		}
		if got, ok := mustGet(t, s, "t", "a"); !ok || got != "3" {
			t.Errorf("same key in another scope: %q, %v", got, ok)
		}
		if m := mustScope(t, s, "s"); !reflect.DeepEqual(m, map[string]any{"b": 2.0}) {
			t.Errorf("Scope after delete = %v", m)
		}
		if !reflect.DeepEqual(before, map[string]any{"a": 1.0, "b": 2.0}) {
			t.Errorf("earlier snapshot changed: %v", before)
		}
		if k := mustKeys(t, s, "s"); !slices.Equal(k, []string{"b"}) {
			t.Errorf("Keys = %v", k)
		}
		apply(t, s, del("s", "b"))
		if m := mustScope(t, s, "s"); len(m) != 0 {
			t.Errorf("Scope after deleting all = %v", m)
		}
	})
}

func TestRejected(t *testing.T) {
	long := strings.Repeat("x", 1025)
	bad := []struct {
		name string
		w    state.Write
	}{
		{"invalid JSON", set("s", "k", `{"a":`)},
		{"trailing garbage", set("s", "k", `1 2`)},
		{"bare word", set("s", "k", `hello`)},
		{"empty value", state.Write{Scope: "s", Key: "k", Value: []byte{}}},
		{"number out of range", set("s", "k", `1e400`)},
		{"empty scope", set("", "k", `1`)},
		{"empty key", set("s", "", `1`)},
		{"empty key delete", del("s", "")},
		{"long scope", set(long, "k", `1`)},
		{"long key", set("s", long, `1`)},
		{"long key delete", del("s", long)},
	}
	stores(t, func(t *testing.T, s *state.Store) {
		apply(t, s, set("s", "keep", `"old"`))
		for _, cached := range []bool{false, true} {
			var snap map[string]any
			if cached {
				snap = mustScope(t, s, "s")
			}
			for _, b := range bad {
				batch := []state.Write{set("s", "keep", `"new"`), set("s", "added", `1`), b.w, set("s2", "x", `2`)}
				if err := s.Apply(batch); err == nil {
					t.Errorf("%s (cached=%v): Apply accepted it", b.name, cached)
				}
				if err := s.Apply([]state.Write{b.w}); err == nil {
					t.Errorf("%s (cached=%v): Apply of it alone accepted it", b.name, cached)
				}
			}
			if got, _ := mustGet(t, s, "s", "keep"); got != `"old"` {
				t.Errorf("cached=%v: keep = %s: a rejected batch wrote", cached, got)
			}
			for _, sc := range []string{"s", "s2", long} {
				want := map[string]any{}
				if sc == "s" {
					want["keep"] = "old"
				}
				if m := mustScope(t, s, sc); !reflect.DeepEqual(m, want) {
					t.Errorf("cached=%v: Scope(%.10q) = %v, want %v", cached, sc, m, want)
				}
			}
			if snap != nil && !reflect.DeepEqual(snap, map[string]any{"keep": "old"}) {
				t.Errorf("snapshot changed: %v", snap)
			}
			if err := s.DropScope("s"); err != nil {
				t.Fatal(err)
			}
			apply(t, s, set("s", "keep", `"old"`))
		}
		// The limits themselves are allowed.
		max := strings.Repeat("y", 1024)
		apply(t, s, set(max, max, `true`))
		if got, ok := mustGet(t, s, max, max); !ok || got != "true" {
			t.Errorf("1024-byte scope and key: %q, %v", got, ok)
		}
		if err := s.Apply(nil); err != nil {
			t.Errorf("Apply(nil) = %v", err)
		}
	})
}

func TestSnapshotImmutableAndCache(t *testing.T) {
	stores(t, func(t *testing.T, s *state.Store) {
		apply(t, s, set("s", "n", `1`), set("s", "obj", `{"list":[1,2],"m":{"a":"b"}}`), set("o", "x", `1`))
		first := mustScope(t, s, "s")
		again := mustScope(t, s, "s")
		if reflect.ValueOf(first).UnsafePointer() != reflect.ValueOf(again).UnsafePointer() {
			t.Error("Scope without a change in between built a new map")
		}
		other := mustScope(t, s, "o")

		apply(t, s, set("s", "n", `2`), set("s", "obj", `{"list":[3]}`), set("s", "added", `"v"`))
		want := map[string]any{"n": 1.0, "obj": map[string]any{"list": []any{1.0, 2.0}, "m": map[string]any{"a": "b"}}}
		if !reflect.DeepEqual(first, want) {
			t.Errorf("snapshot changed by a later Apply: %v", first)
		}
		second := mustScope(t, s, "s")
		want2 := map[string]any{"n": 2.0, "obj": map[string]any{"list": []any{3.0}}, "added": "v"}
		if !reflect.DeepEqual(second, want2) {
			t.Errorf("Scope after Apply = %v, want %v", second, want2)
		}
		if o2 := mustScope(t, s, "o"); reflect.ValueOf(o2).UnsafePointer() != reflect.ValueOf(other).UnsafePointer() {
			t.Error("Apply to one scope rebuilt another scope's snapshot")
		}

		apply(t, s, del("s", "added"))
		if !reflect.DeepEqual(second, want2) {
			t.Errorf("snapshot changed by a later delete: %v", second)
		}
		if err := s.DropScope("s"); err != nil {
			t.Fatal(err)
		}
		if m := mustScope(t, s, "s"); len(m) != 0 {
			t.Errorf("Scope after DropScope = %v", m)
		}
		if _, ok := mustGet(t, s, "s", "n"); ok {
			t.Error("Get after DropScope finds the key")
		}
		if !reflect.DeepEqual(second, want2) {
			t.Errorf("snapshot changed by DropScope: %v", second)
		}
		if m := mustScope(t, s, "o"); !reflect.DeepEqual(m, map[string]any{"x": 1.0}) {
			t.Errorf("DropScope touched another scope: %v", m)
		}
	})
}

func TestManyScopesCached(t *testing.T) {
	// More scopes than the cache holds: every read stays right.
	s := openStore(t, "")
	const n = 5000
	for i := 0; i < n; i += 500 {
		var ws []state.Write
		for j := i; j < i+500; j++ {
			ws = append(ws, set(fmt.Sprint("s", j), "v", fmt.Sprint(j)))
		}
		apply(t, s, ws...)
	}
	for i := 0; i < n+1000; i++ { // the first 1000 twice: evicted by then
		m := mustScope(t, s, fmt.Sprint("s", i%n))
		if m["v"] != float64(i%n) {
			t.Fatalf("Scope(s%d) = %v", i%n, m)
		}
	}
	apply(t, s, set("s1", "v", `-1`))
	if m := mustScope(t, s, "s1"); m["v"] != -1.0 {
		t.Errorf("Scope(s1) = %v", m)
	}
}

func TestMemoryStoresIsolated(t *testing.T) {
	a, b := openStore(t, ""), openStore(t, "")
	apply(t, a, set("s", "k", `"a"`))
	apply(t, b, set("s", "k", `"b"`), set("s", "only-b", `1`))
	if got, _ := mustGet(t, a, "s", "k"); got != `"a"` {
		t.Errorf("store a sees %s", got)
	}
	if k := mustKeys(t, a, "s"); !slices.Equal(k, []string{"k"}) {
		t.Errorf("store a keys %v", k)
	}
	if a.Path() != "" || b.Path() != "" {
		t.Error("memory store has a path")
	}
	// A closed memory store's data is gone; a new one starts empty.
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	c := openStore(t, "")
	if k := mustKeys(t, c, "s"); len(k) != 0 {
		t.Errorf("new memory store has keys %v", k)
	}
}

func TestReopenFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	path := filepath.Join(dir, "state.db")
	s, err := state.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if s.Path() != path {
		t.Errorf("Path() = %q, want %q", s.Path(), path)
	}
	for p, want := range map[string]os.FileMode{dir: 0o700, path: 0o600} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got&^want != 0 {
			t.Errorf("%s: mode %v, want at most %v", p, got, want)
		}
	}
	apply(t, s, set("s", "a", `{"x":[1,2]}`), set("s", "b", `"two"`), set("t", "c", `3`))
	apply(t, s, del("s", "b"))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := s.Apply([]state.Write{set("s", "z", `1`)}); err == nil {
		t.Error("Apply after Close succeeded")
	}
	if _, err := s.Scope("s"); err == nil {
		t.Error("Scope after Close succeeded")
	}
	if _, _, err := s.Get("s", "a"); err == nil {
		t.Error("Get after Close succeeded")
	}
	if _, err := s.Keys("s"); err == nil {
		t.Error("Keys after Close succeeded")
	}

	s2 := openStore(t, path)
	if m := mustScope(t, s2, "s"); !reflect.DeepEqual(m, map[string]any{"a": map[string]any{"x": []any{1.0, 2.0}}}) {
		t.Errorf("reopened Scope(s) = %v", m)
	}
	if got, ok := mustGet(t, s2, "t", "c"); !ok || got != "3" {
		t.Errorf("reopened Get(t, c) = %q, %v", got, ok)
	}
}

func TestNotADatabase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	if err := os.WriteFile(path, []byte(strings.Repeat("not sqlite at all ", 100)), 0o600); err != nil {
		t.Fatal(err)
	}
	if s, err := state.Open(path); err == nil {
		s.Close()
		t.Fatal("Open of a non-database file succeeded")
	}
}

func TestSchemaAndWAL(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s := openStore(t, path)
	apply(t, s, set("s", "k", `1`))

	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var mode string
	if err := db.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil {
		t.Fatal(err)
	}
	if mode != "wal" {
		t.Errorf("journal_mode = %q, want wal", mode)
	}
	var version int
	if err := db.QueryRow("PRAGMA user_version").Scan(&version); err != nil {
		t.Fatal(err)
	}
	if version != 1 {
		t.Errorf("user_version = %d, want 1", version)
	}
	var ddl string
	if err := db.QueryRow(`SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'state'`).Scan(&ddl); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(ddl, "WITHOUT ROWID") || !strings.Contains(ddl, "PRIMARY KEY (scope, key)") {
		t.Errorf("schema: %s", ddl)
	}
	var value, typ string
	var updated int64
	if err := db.QueryRow(`SELECT value, typeof(value), updated_at FROM state WHERE scope = 's' AND key = 'k'`).Scan(&value, &typ, &updated); err != nil {
		t.Fatal(err)
	}
	if value != "1" || typ != "text" || updated < 1_600_000_000_000 {
		t.Errorf("row: value=%q typeof=%s updated_at=%d", value, typ, updated)
	}

	// A newer schema is refused rather than misread.
	if _, err := db.Exec("PRAGMA user_version = 99"); err != nil {
		t.Fatal(err)
	}
	if s2, err := state.Open(path); err == nil {
		s2.Close()
		t.Error("Open accepted a newer schema version")
	}
}

func TestConcurrent(t *testing.T) {
	stores(t, func(t *testing.T, s *state.Store) {
		const writers, perWriter = 8, 60
		var wg sync.WaitGroup
		done := make(chan struct{})
		errs := make(chan error, 64)
		report := func(err error) {
			select {
			case errs <- err:
			default:
			}
		}
		for r := 0; r < 4; r++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for n := 0; ; {
					select {
					case <-done:
						return
					default:
					}
					m, err := s.Scope("shared")
					if err != nil {
						report(err)
						return
					}
					// Each writer's counter only grows, and its keys up to
					// the counter are all there in the same snapshot.
					for g := 0; g < writers; g++ {
						c, ok := m[fmt.Sprint("count", g)].(float64)
						if !ok {
							continue
						}
						if _, ok := m[fmt.Sprintf("w%d-%d", g, int(c))]; !ok {
							report(fmt.Errorf("snapshot has count%d=%v but not its key", g, c))
						}
					}
					if _, _, err := s.Get("shared", "count0"); err != nil {
						report(err)
					}
					time.Sleep(50 * time.Microsecond)
					// Keys of an uncached scope goes to SQLite: now and then.
					if n++; n%32 == 0 {
						if _, err := s.Keys(fmt.Sprint("own", r)); err != nil {
							report(err)
						}
					}
				}
			}()
		}
		var wwg sync.WaitGroup
		for g := 0; g < writers; g++ {
			wwg.Add(1)
			go func() {
				defer wwg.Done()
				for i := 0; i < perWriter; i++ {
					err := s.Apply([]state.Write{
						set("shared", fmt.Sprintf("w%d-%d", g, i), fmt.Sprint(i)),
						set("shared", fmt.Sprint("count", g), fmt.Sprint(i)),
						set(fmt.Sprint("own", g), "i", fmt.Sprint(i)),
					})
					if err != nil {
						report(err)
						return
					}
				}
			}()
		}
		wwg.Wait()
		close(done)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		m := mustScope(t, s, "shared")
		if len(m) != writers*perWriter+writers {
			t.Errorf("shared scope has %d keys, want %d", len(m), writers*perWriter+writers)
		}
		for g := 0; g < writers; g++ {
			if m[fmt.Sprint("count", g)] != float64(perWriter-1) {
				t.Errorf("count%d = %v", g, m[fmt.Sprint("count", g)])
			}
			if got, _ := mustGet(t, s, fmt.Sprint("own", g), "i"); got != fmt.Sprint(perWriter-1) {
				t.Errorf("own%d = %s", g, got)
			}
		}
		if k := mustKeys(t, s, "shared"); len(k) != len(m) || !slices.IsSorted(k) {
			t.Errorf("Keys: %d keys, sorted=%v", len(k), slices.IsSorted(k))
		}
	})
}

func TestConcurrentOpenSameFile(t *testing.T) {
	// Two Stores on one file (as two processes would): creation of the
	// schema and writes serialise through SQLite's locks and busy timeout.
	path := filepath.Join(t.TempDir(), "state.db")
	var wg sync.WaitGroup
	stores := make([]*state.Store, 4)
	for i := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := state.Open(path)
			if err != nil {
				t.Error(err)
				return
			}
			stores[i] = s
			for j := 0; j < 50; j++ {
				if err := s.Apply([]state.Write{set(fmt.Sprint("s", i), fmt.Sprint("k", j), `1`)}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, s := range stores {
		if s != nil {
			s.Close()
		}
	}
	s := openStore(t, path)
	for i := range stores {
		if k := mustKeys(t, s, fmt.Sprint("s", i)); len(k) != 50 {
			t.Errorf("scope s%d has %d keys", i, len(k))
		}
	}
}

// TestOpenRefusesWhatIsNoFile (issue 25, finding 2): a named pipe or a
// device in the database's place got SQLite's "disk I/O error"; it is
// refused, saying why, and the open never waits on it.
func TestOpenRefusesWhatIsNoFile(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "state.db")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // should the open hang (the bug), a writer lets it end
		if f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	})
	for _, path := range []string{fifo, "/dev/zero"} {
		done := make(chan error, 1)
		go func() {
			s, err := state.Open(path)
			if err == nil {
				s.Close()
			}
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil || err.Error() != "state: "+path+" is not a regular file" {
				t.Errorf("Open(%s): %v", path, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("Open(%s) hangs", path)
		}
	}
}
