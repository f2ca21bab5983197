package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"

	"github.com/clara-lib/clara/core/state"
)

// Rule state: one JSON text per (scope, key), as core/state keeps it in
// SQLite, checked by state.Check so that both keep the same values.
//
// Rules read a session's whole state on every event, so scopes are cached
// as in core/state, with one difference: other processes write too. A
// write notifies the others (in its transaction: the notification leaves
// with the commit) and they drop the scope; while the listener is not
// connected nothing is cached, since a change would go unseen. A load that
// an invalidation overtook is not cached either (gen).

const maxCachedScopes = 4096

type stateCache struct {
	mu     sync.Mutex // guards publishing and count
	m      sync.Map   // scope -> *scopeSnapshot
	count  int
	gen    atomic.Uint64 // bumped by every invalidation
	closed atomic.Bool
}

type scopeSnapshot struct {
	vals map[string]any
	raw  map[string][]byte
}

var emptyScope = map[string]any{}

func (c *stateCache) invalidate(scope string) {
	c.gen.Add(1)
	c.mu.Lock()
	if _, ok := c.m.LoadAndDelete(scope); ok {
		c.count--
	}
	c.mu.Unlock()
}

func (c *stateCache) invalidateAll() {
	c.gen.Add(1)
	c.mu.Lock()
	c.m.Clear()
	c.count = 0
	c.mu.Unlock()
}

// publish caches snap unless an invalidation came after gen was read.
func (c *stateCache) publish(scope string, snap *scopeSnapshot, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen.Load() != gen {
		return
	}
	if c.count >= maxCachedScopes {
		drop := maxCachedScopes / 8
		c.m.Range(func(k, _ any) bool {
			c.m.Delete(k)
			c.count--
			drop--
			return drop > 0
		})
	}
	if _, loaded := c.m.Swap(scope, snap); !loaded {
		c.count++
	}
}

// StateGet returns the JSON text at (scope, key), and whether there is
// one, as the database has it now.
func (s *Store) StateGet(ctx context.Context, scope, key string) ([]byte, bool, error) {
	if !state.ValidName(scope) || !state.ValidName(key) {
		return nil, false, nil
	}
	// Read where it is, not from the cache: a read after another
	// process's acknowledged write sees it.
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	if err := s.ready(ctx); err != nil {
		return nil, false, err
	}
	var value string
	err := s.pool.QueryRow(ctx, `SELECT value FROM clara_state WHERE scope = $1 AND key = $2`, scope, key).Scan(&value)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, s.fail("reading state", err)
	}
	return []byte(value), true, nil
}

// StateScope returns the decoded values of a scope: a shared immutable
// map, as state.Store.Scope.
func (s *Store) StateScope(ctx context.Context, scope string) (map[string]any, error) {
	listening := s.listening.Load()
	if listening {
		if v, ok := s.state.m.Load(scope); ok {
			return v.(*scopeSnapshot).vals, nil
		}
	}
	if !state.ValidName(scope) {
		return emptyScope, nil
	}
	gen := s.state.gen.Load()
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	if err := s.ready(ctx); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT key, value FROM clara_state WHERE scope = $1`, scope)
	if err != nil {
		return nil, s.fail("reading state", err)
	}
	snap := &scopeSnapshot{vals: map[string]any{}, raw: map[string][]byte{}}
	for rows.Next() {
		var key, value string
		if err := rows.Scan(&key, &value); err != nil {
			rows.Close()
			return nil, s.fail("reading state", err)
		}
		var v any
		if err := json.Unmarshal([]byte(value), &v); err != nil {
			rows.Close()
			return nil, fmt.Errorf("%s: state %q: key %q: stored value: %w", s.name, scope, key, err)
		}
		snap.vals[key], snap.raw[key] = v, []byte(value)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, s.fail("reading state", err)
	}
	if listening && s.listening.Load() {
		s.state.publish(scope, snap, gen)
	}
	return snap.vals, nil
}

// StateKeys returns the keys of a scope, sorted.
func (s *Store) StateKeys(ctx context.Context, scope string) ([]string, error) {
	m, err := s.StateScope(ctx, scope)
	if err != nil {
		return nil, err
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys, nil
}

// StateApply makes the writes in one transaction, all or none, checked
// as state.Store.Apply checks them; the other processes are told which
// scopes changed when it commits. When it returns nil the writes are
// committed (synchronous_commit as the server has it: on by default).
func (s *Store) StateApply(ctx context.Context, writes []state.Write) error {
	if len(writes) == 0 {
		return nil
	}
	changes, err := state.Check(writes)
	if err != nil {
		return err
	}
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	if err := s.ready(ctx); err != nil {
		return err
	}
	var b pgx.Batch
	scopes := map[string]bool{}
	for i := range changes {
		c := &changes[i]
		if c.Delete {
			b.Queue(`DELETE FROM clara_state WHERE scope = $1 AND key = $2`, c.Scope, c.Key)
		} else {
			b.Queue(`INSERT INTO clara_state (scope, key, value) VALUES ($1, $2, $3)
				ON CONFLICT (scope, key) DO UPDATE SET value = excluded.value, updated_at = now()`, c.Scope, c.Key, string(c.Raw))
		}
		if !scopes[c.Scope] {
			scopes[c.Scope] = true
			b.Queue(`SELECT pg_notify($1, $2)`, channel, "s:"+s.instance+":"+c.Scope)
		}
	}
	// Own writes are kept in the cache under its lock, so that an
	// invalidation from another process that comes meanwhile still wins.
	s.state.mu.Lock()
	defer s.state.mu.Unlock()
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		return tx.SendBatch(ctx, &b).Close()
	})
	if err != nil {
		// Whether it committed is unknown when the connection broke at
		// the commit: drop what is cached of those scopes.
		for scope := range scopes {
			if _, ok := s.state.m.LoadAndDelete(scope); ok {
				s.state.count--
			}
		}
		return s.fail("writing state", err)
	}
	fresh := map[string]*scopeSnapshot{}
	for i := range changes {
		c := &changes[i]
		snap := fresh[c.Scope]
		if snap == nil {
			v, ok := s.state.m.Load(c.Scope)
			if !ok {
				continue
			}
			old := v.(*scopeSnapshot)
			snap = &scopeSnapshot{vals: make(map[string]any, len(old.vals)+1), raw: make(map[string][]byte, len(old.raw)+1)}
			for k, v := range old.vals {
				snap.vals[k] = v
			}
			for k, v := range old.raw {
				snap.raw[k] = v
			}
			fresh[c.Scope] = snap
		}
		if c.Delete {
			delete(snap.vals, c.Key)
			delete(snap.raw, c.Key)
		} else {
			snap.vals[c.Key], snap.raw[c.Key] = c.Val, c.Raw
		}
	}
	for scope, snap := range fresh {
		s.state.m.Store(scope, snap)
	}
	return nil
}
