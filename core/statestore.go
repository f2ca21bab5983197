package core

import (
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
	mu    sync.Mutex
	store *state.Store
	path  string
	log   *logging.Logger
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

// scope is context.state: the session's state (read-only).
func (st *stateStore) scope(s *snapshot, session string) map[string]any {
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
