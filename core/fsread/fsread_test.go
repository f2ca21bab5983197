package fsread_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/clara-lib/clara/core/fsread"
)

func write(t *testing.T, path, text string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// quickly fails the test when f takes more than a few seconds: a named
// pipe read the ordinary way never returns.
func quickly(t *testing.T, what string, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatalf("%s hangs", what)
		return nil
	}
}

func TestFile_regularFilesOnly(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "pipe.lua")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ path, want string }{
		{fifo, fifo + " is a named pipe, not a regular file"},
		{"/dev/zero", "/dev/zero is a device, not a regular file"},
		{"/dev/urandom", "/dev/urandom is a device, not a regular file"},
		{dir, dir + " is a directory, not a regular file"},
	} {
		for name, read := range map[string]func() error{
			"File": func() error { _, err := fsread.File(c.path, 1<<20); return err },
			"In":   func() error { _, err := fsread.In("/", c.path, 1<<20); return err },
			"Open": func() error {
				f, err := fsread.Open(c.path)
				if err == nil {
					f.Close()
				}
				return err
			},
		} {
			err := quickly(t, name+" "+c.path, read)
			if err == nil || err.Error() != c.want || !errors.Is(err, fsread.ErrNotRegular) {
				t.Errorf("%s(%s): %v, want %q", name, c.path, err, c.want)
			}
		}
	}
	big := write(t, filepath.Join(dir, "big.lua"), strings.Repeat("x", 101))
	if _, err := fsread.File(big, 100); err == nil || err.Error() != big+" is 101 bytes, over the 100-byte limit" || !errors.Is(err, fsread.ErrTooLarge) {
		t.Errorf("a file over the limit: %v", err)
	}
	if text, err := fsread.File(big, 101); err != nil || len(text) != 101 {
		t.Errorf("a file at the limit: %d bytes, %v", len(text), err)
	}
	if _, err := fsread.File(filepath.Join(dir, "none"), 100); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing file: %v", err)
	}
}

func TestIn_staysInsideTheRoot(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "plugin")
	inside := write(t, filepath.Join(root, "scripts", "ok.lua"), "return true")
	outside := write(t, filepath.Join(base, "outside", "x.lua"), "return false")
	if err := os.Symlink(outside, filepath.Join(root, "scripts", "link.lua")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(base, "outside"), filepath.Join(root, "lib")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(inside, filepath.Join(root, "alias.lua")); err != nil { // a link that stays inside
		t.Fatal(err)
	}
	for _, ok := range []string{inside, filepath.Join(root, "scripts", "..", "scripts", "ok.lua"), filepath.Join(root, "alias.lua")} {
		if text, err := fsread.In(root, ok, 100); err != nil || string(text) != "return true" {
			t.Errorf("In(%s): %q, %v", ok, text, err)
		}
		if !fsread.Inside(root, ok) {
			t.Errorf("Inside(%s) = false", ok)
		}
	}
	for path, want := range map[string]string{
		outside: outside + " is outside " + root,
		filepath.Join(root, "..", "outside", "x.lua"):      filepath.Join(root, "..", "outside", "x.lua") + " is outside " + root,
		filepath.Join(root, "scripts", "link.lua"):         filepath.Join(root, "scripts", "link.lua") + " leads outside " + root + " through a symbolic link",
		filepath.Join(root, "lib", "x.lua"):                filepath.Join(root, "lib", "x.lua") + " leads outside " + root + " through a symbolic link",
		filepath.Join(root, "scripts", "../../etc/passwd"): filepath.Join(root, "scripts", "../../etc/passwd") + " is outside " + root,
	} {
		if text, err := fsread.In(root, path, 100); err == nil || err.Error() != want || !errors.Is(err, fsread.ErrOutside) {
			t.Errorf("In(%s): %q, %v\nwant %s", path, text, err, want)
		}
		if fsread.Inside(root, path) {
			t.Errorf("Inside(%s) = true", path)
		}
	}
	// A root written through a link, a path through the real folder (and
	// the other way round) are the same place.
	alias := filepath.Join(base, "alias-of-plugin")
	if err := os.Symlink(root, alias); err != nil {
		t.Fatal(err)
	}
	for _, c := range [][2]string{{alias, inside}, {root, filepath.Join(alias, "scripts", "ok.lua")}} {
		if text, err := fsread.In(c[0], c[1], 100); err != nil || string(text) != "return true" {
			t.Errorf("In(%s, %s): %q, %v", c[0], c[1], text, err)
		}
	}
	// A missing file says so, by the name given.
	missing := filepath.Join(root, "scripts", "none.lua")
	if _, err := fsread.In(root, missing, 100); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), missing) {
		t.Errorf("a missing file: %v", err)
	}
}
