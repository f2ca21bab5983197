package core

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/clara-lib/clara/core/config"
	"github.com/clara-lib/clara/core/logging"
	"github.com/clara-lib/clara/core/state"
)

// stateStore holds the rules' state database of the configuration in
// force (SPEC §7.5), opened on first use and reopened when state_dir
// changes.
type stateStore struct {
	mu     sync.Mutex
	store  *state.Store
	path   string
	log    *logging.Logger
	redact func(string) string // the engine's secrets, cut out of messages
}

// With store.backend = "postgres", the rule state lives in the shared
// store (sharedstore.go) and SQLite is used only as on_unavailable.state
// = "local" says.

// get reads (scope, key) of configuration s's rule state.
func (st *stateStore) get(s *snapshot, scope, key string) ([]byte, bool, error) {
	if s.shared != nil {
		v, ok, err := s.shared.StateGet(context.Background(), scope, key)
		if err == nil || !local(err, s.config.Store.OnUnavailable.State) {
			return v, ok, err
		}
	}
	db, err := st.open(s, false)
	if err != nil || db == nil {
		return nil, false, err
	}
	return db.Get(scope, key)
}

// apply writes to configuration s's rule state, all or none.
func (st *stateStore) apply(s *snapshot, writes []state.Write) error {
	if s.shared != nil {
		err := s.shared.StateApply(context.Background(), writes)
		if err == nil || !local(err, s.config.Store.OnUnavailable.State) {
			return err
		}
	}
	db, err := st.open(s, true)
	if err != nil {
		return err
	}
	return db.Apply(writes)
}

// statePath is where the state database lives: "" for memory.
func statePath(c *config.Config) string {
	if c.StateDir == "" {
		return ""
	}
	dir := c.StateDir
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(c.ProjectRoot, dir)
	}
	return filepath.Join(dir, "state.db")
}

// open returns the state database of configuration s, opening it on first
// use. Without create, a database file that does not exist yet is not
// created (nil, nil): the state directory appears only when something is
// stored.
func (st *stateStore) open(s *snapshot, create bool) (*state.Store, error) {
	path := statePath(s.config)
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.store != nil && st.path == path {
		return st.store, nil
	}
	if path != "" && !create {
		if _, err := os.Stat(path); err != nil {
			return nil, nil
		}
	}
	db, err := state.Open(path)
	if err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	if st.store != nil {
		_ = st.store.Close()
	}
	st.store, st.path = db, path
	return db, nil
}

var emptyState = map[string]any{}

// scope is context.state: the session's state (read-only). A store that
// fails is logged, and the rules see an empty state.
func (st *stateStore) scope(s *snapshot, session string) map[string]any {
	if s.shared != nil {
		m, err := s.shared.StateScope(context.Background(), session)
		if err == nil {
			return m
		}
		if !local(err, s.config.Store.OnUnavailable.State) {
			st.log.Logf(logging.Error, "state of %q: %s; the rules see an empty state", session, st.redact(err.Error()))
			return emptyState
		}
	}
	db, err := st.open(s, false)
	if err != nil {
		st.log.Logf(logging.Error, "%v", err)
		return emptyState
	}
	if db == nil {
		return emptyState
	}
	m, err := db.Scope(session)
	if err != nil {
		st.log.Logf(logging.Error, "state of %q: %v", session, err)
		return emptyState
	}
	return m
}
