package state

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver
)

const (
	// schemaVersion is the PRAGMA user_version this package writes and reads.
	schemaVersion = 1

	// maxNameLen bounds a scope or a key, in bytes.
	maxNameLen = 1024

	// busyTimeoutMS is how long a connection waits for a lock held by
	// another connection (or process) before failing with SQLITE_BUSY.
	busyTimeoutMS = 5000

	// fileConns is the connection pool of a file database: WAL lets its
	// readers run in parallel with the one writer.
	fileConns = 4

	// maxCachedScopes bounds the snapshot cache; past it, some cached
	// scopes are dropped (they are rebuilt from SQLite on next use).
	maxCachedScopes = 4096
)

const schema = `CREATE TABLE IF NOT EXISTS state (
	scope      TEXT    NOT NULL,
	key        TEXT    NOT NULL,
	value      TEXT    NOT NULL,
	updated_at INTEGER NOT NULL,
	PRIMARY KEY (scope, key)
) WITHOUT ROWID`

const (
	sqlUpsert = `INSERT INTO state (scope, key, value, updated_at) VALUES (?, ?, ?, ?)
	ON CONFLICT (scope, key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`
	sqlDelete    = `DELETE FROM state WHERE scope = ? AND key = ?`
	sqlGet       = `SELECT value FROM state WHERE scope = ? AND key = ?`
	sqlScope     = `SELECT key, value FROM state WHERE scope = ?`
	sqlKeys      = `SELECT key FROM state WHERE scope = ? ORDER BY key`
	sqlDropScope = `DELETE FROM state WHERE scope = ?`
)

var errClosed = errors.New("state: store is closed")

// memSeq numbers in-memory databases so that each Store gets its own.
var memSeq atomic.Uint64

// emptyScope is what Scope returns for a scope name no write could create.
// Like every snapshot, it is never modified.
var emptyScope = map[string]any{}

// Write is one change given to Apply.
type Write struct {
	Scope, Key string
	// Value is JSON text, stored compacted; nil deletes the key (an empty
	// non-nil slice is invalid JSON, not a delete).
	Value []byte
}

// Store is an open state database. It is safe for concurrent use.
type Store struct {
	db   *sql.DB
	path string

	closed atomic.Bool

	// wmu serialises everything that changes the database or the cache:
	// Apply, DropScope, building a scope's snapshot, Close. Holding it
	// across a commit and the cache update keeps the two in step.
	wmu    sync.Mutex
	cache  sync.Map // scope -> *snapshot; read without a lock
	cached int      // entries in cache; guarded by wmu
}

// snapshot is the cached content of one scope. It is never modified once
// published; a change publishes a new one.
type snapshot struct {
	vals map[string]any    // decoded values, handed out by Scope
	raw  map[string][]byte // compact JSON text, for Get
}

// Open opens (creating if needed, with its parent directory, mode 0700 dir /
// 0600 file) the state database at path, in WAL mode; path "" opens a
// private in-memory database (one per Store).
func Open(path string) (*Store, error) {
	var dsn string
	if path == "" {
		// One connection that is never retired: a memory database lives as
		// long as a connection to it, and the driver keeps memory
		// connections valid. The unique name keeps Stores apart.
		dsn = fmt.Sprintf("file:clara-state-%d-%d?mode=memory&cache=shared"+
			"&_txlock=immediate&_pragma=busy_timeout(%d)",
			os.Getpid(), memSeq.Add(1), busyTimeoutMS)
	} else {
		abs, err := filepath.Abs(path)
		if err != nil {
			return nil, fmt.Errorf("state: %w", err)
		}
		if err := os.MkdirAll(filepath.Dir(abs), 0o700); err != nil {
			return nil, fmt.Errorf("state: %w", err)
		}
		// Create the file ourselves so it gets mode 0600; SQLite gives its
		// -wal and -shm files the database file's mode.
		// O_NONBLOCK and the mode check: a named pipe or a device in its
		// place is refused, saying so (SQLite would say "disk I/O error"),
		// without waiting on it.
		f, err := os.OpenFile(abs, os.O_RDWR|os.O_CREATE|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0o600)
		if err != nil {
			return nil, fmt.Errorf("state: %w", err)
		}
		info, err := f.Stat()
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("state: %w", err)
		}
		if !info.Mode().IsRegular() {
			return nil, fmt.Errorf("state: %s is not a regular file", abs)
		}
		u := url.URL{Path: abs}
		// journal_mode is persistent, so init sets it once; synchronous is
		// per connection.
		dsn = fmt.Sprintf("file:%s?_txlock=immediate&_pragma=busy_timeout(%d)"+
			"&_pragma=synchronous(NORMAL)",
			u.EscapedPath(), busyTimeoutMS)
	}

	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("state: open %q: %w", path, err)
	}
	if path == "" {
		db.SetMaxOpenConns(1)
		db.SetMaxIdleConns(1)
	} else {
		db.SetMaxOpenConns(fileConns)
		db.SetMaxIdleConns(fileConns)
	}
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)

	s := &Store{db: db, path: path}
	if err := s.init(); err != nil {
		db.Close()
		return nil, fmt.Errorf("state: open %q: %w", path, err)
	}
	return s, nil
}

// init checks the journal mode and creates or checks the schema.
func (s *Store) init() error {
	ctx := context.Background()
	if s.path != "" {
		if err := s.setWAL(ctx); err != nil {
			return err
		}
	}
	tx, err := s.db.BeginTx(ctx, nil) // BEGIN IMMEDIATE: one opener at a time
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var version int
	if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		return err
	}
	switch {
	case version == 0:
		if _, err := tx.ExecContext(ctx, schema); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", schemaVersion)); err != nil {
			return err
		}
	case version > schemaVersion:
		return fmt.Errorf("schema version %d is newer than this Clara's (%d)", version, schemaVersion)
	}
	return tx.Commit()
}

// setWAL puts the database in WAL mode (a persistent setting). Switching
// takes an exclusive lock without going through SQLite's busy handler, so a
// busy database is retried here, within the busy timeout.
func (s *Store) setWAL(ctx context.Context) error {
	deadline := time.Now().Add(busyTimeoutMS * time.Millisecond)
	for {
		var mode string
		err := s.db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode)
		if err == nil && mode != "wal" {
			err = s.db.QueryRowContext(ctx, "PRAGMA journal_mode = WAL").Scan(&mode)
		}
		switch {
		case err == nil && mode == "wal":
			return nil
		case err == nil:
			return fmt.Errorf("journal mode is %q, not wal", mode)
		case !isBusy(err) || time.Now().After(deadline):
			return err
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// isBusy reports whether err is SQLITE_BUSY (any extended code).
func isBusy(err error) bool {
	var e interface{ Code() int }
	return errors.As(err, &e) && e.Code()&0xff == 5 // SQLITE_BUSY
}

// Path returns the path given to Open: "" for an in-memory database.
func (s *Store) Path() string { return s.path }

// Close closes the database, after any Apply in progress. Later calls of any
// method but Path fail; closing again does nothing.
func (s *Store) Close() error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.closed.Swap(true) {
		return nil
	}
	s.cache.Clear()
	s.cached = 0
	return s.db.Close()
}

// validName reports whether a scope or key can be written.
func validName(name string) bool { return name != "" && len(name) <= maxNameLen }

// Get returns the JSON text stored at (scope, key), and whether there is one.
// The slice is the caller's.
func (s *Store) Get(scope, key string) (value []byte, ok bool, err error) {
	if s.closed.Load() {
		return nil, false, errClosed
	}
	if !validName(scope) || !validName(key) {
		return nil, false, nil
	}
	if v, hit := s.cache.Load(scope); hit {
		raw, ok := v.(*snapshot).raw[key]
		if !ok {
			return nil, false, nil
		}
		return bytes.Clone(raw), true, nil
	}
	err = s.db.QueryRowContext(context.Background(), sqlGet, scope, key).Scan(&value)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("state: get %q/%q: %w", scope, key, err)
	}
	return value, true, nil
}

// Scope returns the decoded values of a scope, key -> value as
// encoding/json decodes into an any (numbers as float64). The map is a
// shared immutable snapshot: the caller must not modify it or anything in
// it, and later writes do not change it. When the scope has not changed
// since the last call, this is one map load.
func (s *Store) Scope(scope string) (map[string]any, error) {
	if s.closed.Load() {
		return nil, errClosed
	}
	if v, ok := s.cache.Load(scope); ok {
		return v.(*snapshot).vals, nil
	}
	if !validName(scope) {
		return emptyScope, nil
	}
	snap, err := s.load(scope)
	if err != nil {
		return nil, err
	}
	return snap.vals, nil
}

// load reads a scope from SQLite into a snapshot and caches it.
func (s *Store) load(scope string) (*snapshot, error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.closed.Load() {
		return nil, errClosed
	}
	// Another goroutine may have loaded it while this one waited.
	if v, ok := s.cache.Load(scope); ok {
		return v.(*snapshot), nil
	}
	rows, err := s.db.QueryContext(context.Background(), sqlScope, scope)
	if err != nil {
		return nil, fmt.Errorf("state: scope %q: %w", scope, err)
	}
	defer rows.Close()
	snap := &snapshot{vals: map[string]any{}, raw: map[string][]byte{}}
	for rows.Next() {
		var key string
		var raw []byte
		if err := rows.Scan(&key, &raw); err != nil {
			return nil, fmt.Errorf("state: scope %q: %w", scope, err)
		}
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, fmt.Errorf("state: scope %q: key %q: stored value: %w", scope, key, err)
		}
		snap.vals[key] = v
		snap.raw[key] = raw
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("state: scope %q: %w", scope, err)
	}
	s.publishLocked(scope, snap)
	return snap, nil
}

// publishLocked caches a new scope, dropping others if the cache is full.
// The caller holds wmu.
func (s *Store) publishLocked(scope string, snap *snapshot) {
	if s.cached >= maxCachedScopes {
		drop := maxCachedScopes / 8
		s.cache.Range(func(k, _ any) bool {
			s.cache.Delete(k)
			s.cached--
			drop--
			return drop > 0
		})
	}
	s.cache.Store(scope, snap)
	s.cached++
}

// Keys returns the keys of a scope, sorted (bytewise).
func (s *Store) Keys(scope string) ([]string, error) {
	if s.closed.Load() {
		return nil, errClosed
	}
	if !validName(scope) {
		return []string{}, nil
	}
	if v, ok := s.cache.Load(scope); ok {
		raw := v.(*snapshot).raw
		keys := make([]string, 0, len(raw))
		for k := range raw {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		return keys, nil
	}
	rows, err := s.db.QueryContext(context.Background(), sqlKeys, scope)
	if err != nil {
		return nil, fmt.Errorf("state: keys %q: %w", scope, err)
	}
	defer rows.Close()
	keys := []string{}
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			return nil, fmt.Errorf("state: keys %q: %w", scope, err)
		}
		keys = append(keys, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("state: keys %q: %w", scope, err)
	}
	return keys, nil
}

// Change is one checked Write: what Check makes of it.
type Change struct {
	Scope, Key string
	Delete     bool
	Raw        []byte // compact JSON text
	Val        any    // Raw decoded, as Scope hands it out
}

// Check checks writes as Apply does (an empty scope or key, one longer
// than 1024 bytes, a non-nil Value that is not JSON or holds a number
// outside float64's range) and returns them compacted and decoded. Another
// store of rule state (the shared PostgreSQL one) checks with it, so that
// both refuse and keep the same values.
func Check(writes []Write) ([]Change, error) {
	changes := make([]Change, len(writes))
	for i, w := range writes {
		c := &changes[i]
		c.Scope, c.Key = w.Scope, w.Key
		if !validName(w.Scope) {
			return nil, fmt.Errorf("state: write %d: scope must be 1 to %d bytes, got %d", i, maxNameLen, len(w.Scope))
		}
		if !validName(w.Key) {
			return nil, fmt.Errorf("state: write %d: key must be 1 to %d bytes, got %d", i, maxNameLen, len(w.Key))
		}
		if w.Value == nil {
			c.Delete = true
			continue
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, w.Value); err != nil {
			return nil, fmt.Errorf("state: write %d (%q/%q): value is not valid JSON: %w", i, w.Scope, w.Key, err)
		}
		c.Raw = buf.Bytes()
		if err := json.Unmarshal(c.Raw, &c.Val); err != nil {
			return nil, fmt.Errorf("state: write %d (%q/%q): value: %w", i, w.Scope, w.Key, err)
		}
	}
	return changes, nil
}

// ValidName reports whether a scope or key can be written: 1 to 1024 bytes.
func ValidName(name string) bool { return validName(name) }

// Apply makes all the writes in one transaction: all or none. It checks
// every write first and writes nothing if one is invalid (see Check).
// Writes apply in order, so a later write to the same key wins.
func (s *Store) Apply(writes []Write) error {
	if s.closed.Load() {
		return errClosed
	}
	if len(writes) == 0 {
		return nil
	}
	changes, err := Check(writes)
	if err != nil {
		return err
	}

	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.closed.Load() {
		return errClosed
	}
	if err := s.commit(changes); err != nil {
		return fmt.Errorf("state: apply: %w", err)
	}
	s.updateCacheLocked(changes)
	return nil
}

// commit writes the changes in one transaction. The caller holds wmu.
func (s *Store) commit(changes []Change) error {
	ctx := context.Background()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var upsert, del *sql.Stmt
	now := time.Now().UnixMilli()
	for i := range changes {
		c := &changes[i]
		if c.Delete {
			if del == nil {
				if del, err = tx.PrepareContext(ctx, sqlDelete); err != nil {
					return err
				}
				defer del.Close()
			}
			_, err = del.ExecContext(ctx, c.Scope, c.Key)
		} else {
			if upsert == nil {
				if upsert, err = tx.PrepareContext(ctx, sqlUpsert); err != nil {
					return err
				}
				defer upsert.Close()
			}
			// Bound as a string so SQLite stores TEXT, not a BLOB.
			_, err = upsert.ExecContext(ctx, c.Scope, c.Key, string(c.Raw), now)
		}
		if err != nil {
			return err
		}
	}
	return tx.Commit()
}

// updateCacheLocked publishes new snapshots of the cached scopes that the
// committed changes touch. The caller holds wmu.
func (s *Store) updateCacheLocked(changes []Change) {
	var fresh map[string]*snapshot // scopes copied during this update
	for i := range changes {
		c := &changes[i]
		snap := fresh[c.Scope]
		if snap == nil {
			v, ok := s.cache.Load(c.Scope)
			if !ok {
				continue // not cached: built from SQLite on first use
			}
			old := v.(*snapshot)
			snap = &snapshot{
				vals: make(map[string]any, len(old.vals)+1),
				raw:  make(map[string][]byte, len(old.raw)+1),
			}
			for k, v := range old.vals {
				snap.vals[k] = v
			}
			for k, v := range old.raw {
				snap.raw[k] = v
			}
			if fresh == nil {
				fresh = map[string]*snapshot{}
			}
			fresh[c.Scope] = snap
		}
		if c.Delete {
			delete(snap.vals, c.Key)
			delete(snap.raw, c.Key)
		} else {
			snap.vals[c.Key] = c.Val
			snap.raw[c.Key] = c.Raw
		}
	}
	for scope, snap := range fresh {
		s.cache.Store(scope, snap)
	}
}

// DropScope deletes every key of a scope. Sessions ending do not call it:
// state outlives sessions. It is for tests and tools.
func (s *Store) DropScope(scope string) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.closed.Load() {
		return errClosed
	}
	if _, err := s.db.ExecContext(context.Background(), sqlDropScope, scope); err != nil {
		return fmt.Errorf("state: drop scope %q: %w", scope, err)
	}
	if _, ok := s.cache.LoadAndDelete(scope); ok {
		s.cached--
	}
	return nil
}
