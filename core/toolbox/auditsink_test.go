package toolbox_test

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/clara-lib/clara/core/toolbox"
)

func auditLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// TestAudit_reopenAfterRotation: a log rotation renames the file; Reopen
// makes the next records go to a new file at the configured path, not to
// the renamed one.
func TestAudit_reopenAfterRotation(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.jsonl")
	a := toolbox.NewAudit(nil)
	if err := a.SetFile(path); err != nil {
		t.Fatal(err)
	}
	defer a.SetFile("")
	a.Add(toolbox.Record{Time: time.Now(), Session: "s", Tool: "before"}, nil)
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	a.Add(toolbox.Record{Time: time.Now(), Session: "s", Tool: "renamed"}, nil)
	if err := a.Reopen(); err != nil {
		t.Fatal(err)
	}
	a.Add(toolbox.Record{Time: time.Now(), Session: "s", Tool: "after"}, nil)
	old, cur := auditLines(t, path+".1"), auditLines(t, path)
	if len(old) != 2 || len(cur) != 1 || !strings.Contains(cur[0], `"tool":"after"`) {
		t.Fatalf("renamed file %q, new file %q", old, cur)
	}
}

// TestAudit_sizeRotation: with max_size_mb the file is rotated by size,
// every record whole in one file or the other, and max_backups bounds
// the rotated files.
func TestAudit_sizeRotation(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.jsonl")
	a := toolbox.NewAudit(nil)
	if err := a.SetSink(toolbox.AuditSink{Path: path, MaxSizeMB: 1, MaxBackups: 2}); err != nil {
		t.Fatal(err)
	}
	defer a.SetFile("")
	// ~1 KiB records (a long session name): 3,000 of them is ~3 MiB.
	session := strings.Repeat("s", 900)
	for i := 0; i < 3000; i++ {
		a.Add(toolbox.Record{Time: time.Now(), Session: session, Tool: "t"}, nil)
	}
	if err := a.Reopen(); err != nil { // lumberjack closes; the next write reopens
		t.Fatal(err)
	}
	a.Add(toolbox.Record{Time: time.Now(), Session: "s", Tool: "last"}, nil)
	var files []string
	deadline := time.Now().Add(5 * time.Second)
	for {
		files, _ = filepath.Glob(filepath.Join(dir, "audit*.jsonl"))
		if len(files) <= 3 || time.Now().After(deadline) { // lumberjack removes old backups on a goroutine
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(files) != 3 {
		t.Fatalf("files %v: want the current one and 2 backups", files)
	}
	seen := 0
	for _, f := range files {
		info, _ := os.Stat(f)
		if info.Size() > 1<<20 {
			t.Errorf("%s is %d bytes, past max_size_mb", f, info.Size())
		}
		for _, line := range auditLines(t, f) {
			var m map[string]any
			if err := json.Unmarshal([]byte(line), &m); err != nil {
				t.Fatalf("%s: a record cut in two: %.80s", f, line)
			}
			seen++
		}
	}
	if seen < 1000 {
		t.Errorf("only %d records in the kept files", seen)
	}
	if cur := auditLines(t, path); !strings.Contains(cur[len(cur)-1], `"tool":"last"`) {
		t.Errorf("the last record is not in %s", path)
	}
}

// TestAudit_namedPipe: a named pipe with a reader is a sink (an operator's
// log shipper); one nobody reads is refused at once, not waited for.
func TestAudit_namedPipe(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.fifo")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Skip(err)
	}
	a := toolbox.NewAudit(nil)
	if err := a.SetFile(path); err == nil || !strings.Contains(err.Error(), "no process reads") {
		t.Fatalf("a pipe without reader: %v", err)
	}
	r, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := a.SetFile(path); err != nil {
		t.Fatal(err)
	}
	defer a.SetFile("")
	a.Add(toolbox.Record{Time: time.Now(), Session: "s", Tool: "piped"}, nil)
	_ = r.SetReadDeadline(time.Now().Add(5 * time.Second))
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil || !strings.Contains(line, `"tool":"piped"`) {
		t.Fatalf("read %q, %v", line, err)
	}
}

// TestAudit_standardOutput: "-" and "/dev/stdout" are standard output.
func TestAudit_standardOutput(t *testing.T) {
	rd, wr, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stdout
	os.Stdout = wr
	defer func() { os.Stdout = saved }()
	a := toolbox.NewAudit(nil)
	for _, p := range []string{"-", "/dev/stdout"} {
		if err := a.SetFile(p); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		a.Add(toolbox.Record{Time: time.Now(), Session: "s", Tool: "out"}, nil)
	}
	if err := a.SetFile(""); err != nil {
		t.Fatal(err)
	}
	wr.Close()
	b := make([]byte, 4096)
	n, _ := rd.Read(b)
	if strings.Count(string(b[:n]), `"tool":"out"`) != 2 {
		t.Fatalf("standard output got %q", b[:n])
	}
	if _, err := wr.Write([]byte("x")); err == nil {
		t.Log("stdout still open, as it must be: the audit does not close it")
	}
}

// TestAudit_ticketsAndParents: a reserved ticket is the record's decision
// id, and a parent is written as given.
func TestAudit_ticketsAndParents(t *testing.T) {
	a := toolbox.NewAudit(nil)
	parent := a.Reserve()
	child := a.Reserve()
	a.Add(toolbox.Record{Time: time.Now(), Session: "s", Tool: "child", Decision: child, Parent: parent}, nil)
	a.Add(toolbox.Record{Time: time.Now().Add(time.Millisecond), Session: "s", Tool: "parent", Decision: parent}, nil)
	recs := a.Tail(2)
	if len(recs) != 2 || recs[0].Decision != child || recs[0].Parent != parent || recs[1].Decision != parent || recs[1].Parent.Valid() {
		t.Fatalf("%+v", recs)
	}
	var m map[string]any
	if err := json.Unmarshal(recs[0].AppendJSON(nil), &m); err != nil || m["decision_id"] != child.String() || m["parent_id"] != parent.String() {
		t.Fatalf("%v %v", m, err)
	}
	if parent.String() == child.String() {
		t.Fatal("two tickets, one id")
	}
}

// TestAudit_tailSkipsTicketsStillRunning: the ticket of a call still
// running (audit_tail's own, as it reads) has no record yet; it must not
// hide the records before it.
func TestAudit_tailSkipsTicketsStillRunning(t *testing.T) {
	a := toolbox.NewAudit(nil)
	a.Add(toolbox.Record{Time: time.Now(), Session: "s", Tool: "first"}, nil)
	a.Add(toolbox.Record{Time: time.Now().Add(time.Millisecond), Session: "s", Tool: "second"}, nil)
	for i := 0; i < 8; i++ {
		_ = a.Reserve() // calls under way, in every shard
	}
	recs := a.Tail(2)
	if len(recs) != 2 || recs[0].Tool != "first" || recs[1].Tool != "second" {
		t.Fatalf("%+v", recs)
	}
}
