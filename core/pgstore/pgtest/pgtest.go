// Package pgtest gives tests a real PostgreSQL: the server tests/pg.sh
// starts under build/ (once per test binary, stopped by Main), and a
// fresh database on it for each test that asks.
//
// CLARA_TEST_PG_URL, when set, is a server to use instead (its user must
// be allowed to create databases). When the PostgreSQL binaries are not
// installed, tests skip, saying so, unless CLARA_REQUIRE_PG=1 (set by the
// Makefile: `make test` has them), where they fail.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

var (
	once     sync.Once
	baseURL  string
	startErr error
	absent   bool   // the binaries are not installed
	dir      string // the server's folder, when this binary started it
	seq      atomic.Int64
)

// Root is the repository's root folder (where go.mod is).
func Root() (string, error) {
	d, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(d, "tests", "pg.sh")); err == nil {
			return d, nil
		}
		up := filepath.Dir(d)
		if up == d {
			return "", errors.New("pgtest: tests/pg.sh not found above the working directory")
		}
		d = up
	}
}

func start() {
	if u := os.Getenv("CLARA_TEST_PG_URL"); u != "" {
		baseURL = u
		return
	}
	root, err := Root()
	if err != nil {
		startErr = err
		return
	}
	dir = filepath.Join(root, "build", fmt.Sprintf("pgtest-%d", os.Getpid()))
	out, err := exec.Command("bash", filepath.Join(root, "tests", "pg.sh"), "start", dir).Output()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 3 {
		absent = true
		startErr = errors.New("the PostgreSQL server binaries are not installed (apt-get install postgresql; make setup)")
		return
	}
	if err != nil {
		if ee != nil {
			err = fmt.Errorf("%v: %s", err, ee.Stderr)
		}
		startErr = fmt.Errorf("tests/pg.sh start: %w", err)
		return
	}
	baseURL = strings.TrimSpace(string(out))
}

// Base returns the URL of the test server's database "clara", starting the
// server on first use; it skips (or fails, with CLARA_REQUIRE_PG=1) when
// PostgreSQL is not installed.
func Base(t testing.TB) string {
	t.Helper()
	once.Do(start)
	if startErr != nil {
		if absent && os.Getenv("CLARA_REQUIRE_PG") != "1" {
			t.Skipf("skipped: %v", startErr)
		}
		t.Fatalf("PostgreSQL for the tests: %v", startErr)
	}
	return baseURL
}

// Dir is the folder of the server this binary started ("" when it uses
// CLARA_TEST_PG_URL): tests/pg.sh restart/kill take it.
func Dir() string { return dir }

// URL returns the URL of a fresh, empty database on the test server.
func URL(t testing.TB) string {
	t.Helper()
	base := Base(t)
	name := fmt.Sprintf("t%d_%d", os.Getpid(), seq.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("pgtest: connecting: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	u.Path = "/" + name
	return u.String()
}

// Main runs the tests, then stops the server this binary started.
func Main(m *testing.M) {
	code := m.Run()
	Stop()
	os.Exit(code)
}

// Stop stops the server this binary started, and deletes its folder.
func Stop() {
	if dir == "" {
		return
	}
	root, err := Root()
	if err == nil {
		_ = exec.Command("bash", filepath.Join(root, "tests", "pg.sh"), "stop", dir).Run()
	}
	_ = os.RemoveAll(dir)
}
