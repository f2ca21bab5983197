package callbacks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

const (
	logCap        = 1 << 20         // bytes of output a log keeps
	tailKeep      = 8 << 10         // bytes of the output's end kept in memory
	tailLines     = 3               // lines of output in output_tail and notices
	tailLineMax   = 512             // bytes of one tail line
	killGrace     = 2 * time.Second // SIGTERM to SIGKILL
	drainWait     = time.Second     // for the pipe after the group is gone
	groupGoneWait = time.Second     // for the killed group to disappear
	envListMax    = 96 << 10        // CLARA_CHANGED_FILES stays under the kernel's 128 KiB per string
)

var logSeq atomic.Uint64

// run runs the script of d once for files and reports how it went. ctx
// ending stops the run as a timeout does (SIGTERM, then SIGKILL).
func (m *Manager) run(ctx context.Context, env runEnv, d *Definition, files []string) RunResult {
	r := RunResult{ID: d.ID, Name: d.Name, Files: files, success: d.SuccessMessage}
	timeout := d.TimeoutSecs
	if timeout <= 0 {
		timeout = defaultBGTimeout
	}
	start := time.Now()
	m.running.Add(1)
	m.exec(ctx, env, d, files, time.Duration(timeout)*time.Second, &r)
	m.running.Add(-1)
	r.DurationMS = time.Since(start).Milliseconds()
	r.OK = r.ExitCode == 0 && !r.TimedOut && r.Error == ""
	r.Notice = r.notice(timeout)
	if !r.OK {
		m.logf("info", "%s (%s) failed: exit %d, timed out %v, %s", d.Name, d.ID, r.ExitCode, r.TimedOut, r.Error)
	}
	return r
}

func (m *Manager) exec(ctx context.Context, env runEnv, d *Definition, files []string, timeout time.Duration, r *RunResult) {
	fail := func(err error) {
		r.ExitCode = -1
		r.Error = err.Error()
	}
	script, dir, err := scriptAndDir(ctx, env, d)
	if err != nil {
		fail(err)
		return
	}
	list, envList, err := writeChangedFiles(files)
	if err != nil {
		fail(err)
		return
	}
	defer list.Close()

	logDir := filepath.Join(env.stateDir, logsDir)
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		fail(fmt.Errorf("logs: %v", err))
		return
	}
	logFile, err := createLog(logDir, d.Name)
	if err != nil {
		fail(fmt.Errorf("log: %v", err))
		return
	}
	out := &capture{f: logFile}
	keepLog := false
	defer func() {
		logFile.Close()
		if keepLog {
			r.Log = logFile.Name()
		} else {
			os.Remove(logFile.Name())
		}
	}()

	environ := append(hostEnv(),
		"CLARA_CHANGED_FILES="+envList,
		"CLARA_CHANGED_FILES_LIST=/dev/fd/3",
		"CLARA_CHANGED_FILES_COUNT="+strconv.Itoa(len(files)),
		"CLARA_PROJECT_ROOT="+env.root,
		"CLARA_CALLBACK_NAME="+d.Name,
		"CLARA_CALLBACK_ID="+d.ID,
		// The seed's names, for scripts written for it.
		"CP_CHANGED_FILES="+envList,
		"CP_PROJECT_ROOT="+env.root,
		"CP_CALLBACK_NAME="+d.Name,
	)
	// A stored callback runs its script file; one the configuration
	// declares runs its text, with the same first lines a file gets.
	argv := []string{"bash", script}
	if d.Configured {
		argv = []string{"bash", "-c", "set -euo pipefail\n" + d.run, d.Name}
	}
	var stdin *os.File
	switch d.PassFiles {
	case PassFilesArgs:
		argv = append(argv, files...) // runJob keeps a run's arguments under argsMax
	case PassFilesStdin:
		if stdin, err = stdinJSON(env, d, files); err != nil {
			fail(err)
			return
		}
		defer stdin.Close()
	}
	if err := m.runScript(ctx, argv, dir, environ, list, stdin, timeout, out, r); err != nil {
		fail(err)
		keepLog = true
		return
	}
	r.Truncated = out.truncated
	r.OutputTail = out.tailText()
	keepLog = r.ExitCode != 0 || r.TimedOut || r.Error != ""
	if keepLog {
		logFile.Sync()
		defer pruneLogs(logDir, d.Name)
	}
}

// scriptAndDir finds the callback's script and the directory it runs in.
func scriptAndDir(ctx context.Context, env runEnv, d *Definition) (script, dir string, err error) {
	if err := ctx.Err(); err != nil {
		return "", "", fmt.Errorf("stopped: %v", context.Cause(ctx))
	}
	if !d.Configured {
		script = filepath.Join(env.stateDir, scriptsDir, d.Name+".sh")
		if _, err := os.Stat(script); err != nil {
			return "", "", fmt.Errorf("script: %v", err)
		}
	}
	dir = env.root
	if d.Cwd != "" {
		if dir, err = resolveCwd(env.root, d.Cwd); err != nil {
			return "", "", err
		}
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			return "", "", fmt.Errorf("cwd %q is not a directory", d.Cwd)
		}
	}
	return script, dir, nil
}

// writeChangedFiles writes the run's files to a temporary file that is
// removed at once: the script reads it as CLARA_CHANGED_FILES_LIST
// (/dev/fd/3), and nothing is left behind, even when the host exits during
// the run. It returns the file, open for reading, and CLARA_CHANGED_FILES's
// value: the list itself, or "" when too long for the environment.
func writeChangedFiles(files []string) (f *os.File, envList string, err error) {
	list := strings.Join(files, "\n")
	f, err = os.CreateTemp("", "clara-changed-files-*.txt")
	if err != nil {
		return nil, "", fmt.Errorf("changed files list: %v", err)
	}
	os.Remove(f.Name())
	if _, err = io.WriteString(f, list+"\n"); err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil {
		f.Close()
		return nil, "", fmt.Errorf("changed files list: %v", err)
	}
	if len(list) > envListMax {
		list = ""
	}
	return f, list, nil
}

// stdinJSON writes what a pass_files = "stdin" script reads on its
// standard input to a temporary file removed at once (a pipe could fill
// before the script reads it):
// {"callback_id","callback_name","project_root","changed_files":[...]}.
func stdinJSON(env runEnv, d *Definition, files []string) (*os.File, error) {
	data, err := json.Marshal(struct {
		ID           string   `json:"callback_id"`
		Name         string   `json:"callback_name"`
		ProjectRoot  string   `json:"project_root"`
		ChangedFiles []string `json:"changed_files"`
	}{d.ID, d.Name, env.root, files})
	if err != nil {
		return nil, fmt.Errorf("stdin: %v", err)
	}
	f, err := os.CreateTemp("", "clara-callback-stdin-*.json")
	if err != nil {
		return nil, fmt.Errorf("stdin: %v", err)
	}
	os.Remove(f.Name())
	if _, err = f.Write(append(data, '\n')); err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("stdin: %v", err)
	}
	return f, nil
}

// argsMax bounds the bytes of file arguments one pass_files = "args" run
// gets: the kernel's limit on arguments and environment together
// (ARG_MAX, often 2 MiB) must hold them and the environment, where the
// lists take up to 2 × envListMax. A longer batch is split into several
// runs, each under it (and each run's CLARA_CHANGED_FILES then holds its
// whole part).
const argsMax = envListMax

// splitArgs cuts files into runs of at most argsMax bytes of arguments
// (one file longer than that is a run of its own).
func splitArgs(files []string) [][]string {
	var runs [][]string
	start, size := 0, 0
	for i, f := range files {
		n := len(f) + 1
		if i > start && size+n > argsMax {
			runs = append(runs, files[start:i])
			start, size = i, 0
		}
		size += n
	}
	return append(runs, files[start:])
}

// runScript runs the script in a session of its own with its output in
// out, until it exits, its timeout (TERM, then KILL after killGrace) or
// ctx ends; then kills what is left of the session and sets r's exit code,
// signal and timeout. An error: the script could not start.
func (m *Manager) runScript(ctx context.Context, argv []string, dir string, environ []string, list, stdin *os.File, timeout time.Duration, out *capture, r *RunResult) error {
	pr, pw, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("pipe: %v", err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	if stdin != nil {
		cmd.Stdin = stdin
	}
	cmd.Dir = dir
	cmd.Env = environ
	cmd.Stdout, cmd.Stderr = pw, pw
	cmd.ExtraFiles = []*os.File{list} // fd 3: CLARA_CHANGED_FILES_LIST
	// A session of its own, not only a process group: a process of the
	// script that moves to another group (timeout(1), set -m) stays in the
	// session and is found and killed with the rest. Only setsid leaves.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		return fmt.Errorf("start: %v", err)
	}
	pw.Close() // the child holds the write end now
	pgid := cmd.Process.Pid

	drained := make(chan struct{})
	m.goSafe("callback output", func() {
		defer close(drained)
		buf := make([]byte, 32<<10)
		for {
			n, err := pr.Read(buf)
			out.write(buf[:n])
			if err != nil {
				return
			}
		}
	})
	// The leader's exit, seen without reaping it: while it is a zombie its
	// pid (the group's id) cannot be given to another process, so killing
	// the group afterwards cannot hit a stranger.
	exited := make(chan struct{})
	m.goSafe("callback exit", func() {
		defer close(exited)
		waitExitNoReap(pgid)
	})

	waitOrStop(ctx, pgid, timeout, exited, r)
	// Whatever is left of the session goes, the leader too if it is still
	// there: daemons the script left behind are orphans otherwise.
	strays := signalSession(pgid, syscall.SIGKILL)
	<-exited
	werr := cmd.Wait()
	waitGroupGone(pgid, strays, groupGoneWait)

	// Every writer in the group is dead: the pipe ends soon. A process that
	// left the group (setsid) and holds the pipe does not hold us up.
	select {
	case <-drained:
	case <-time.After(drainWait):
		pr.SetReadDeadline(time.Now())
		<-drained
		out.note("[clara: stopped reading output: a process outside the callback's group holds it open]")
	}
	pr.Close()

	r.ExitCode = exitCode(cmd.ProcessState, werr)
	if ps := cmd.ProcessState; ps != nil {
		if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			r.signal = int(ws.Signal())
		}
	}
	return nil
}

// waitOrStop waits for the script's leader to exit; at its timeout or when
// ctx ends it sends TERM to the session and waits killGrace more.
func waitOrStop(ctx context.Context, pgid int, timeout time.Duration, exited <-chan struct{}, r *RunResult) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-exited:
		return
	case <-timer.C:
		r.TimedOut = true
	case <-ctx.Done():
		r.Error = "stopped: " + context.Cause(ctx).Error()
	}
	signalSession(pgid, syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(killGrace):
	}
}

// keptLogs is how many failure logs of one callback are kept: a callback
// that keeps failing must not fill the disk.
const keptLogs = 20

// pruneLogs removes the oldest failure logs of callback name beyond
// keptLogs. Log names are NAME-YYYYMMDDThhmmss...: the date after the name
// tells "lint" from "lint-2", and sorts by time.
func pruneLogs(dir, name string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	var mine []string
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), name+"-")
		if ok && len(rest) > 9 && rest[8] == 'T' && strings.HasSuffix(rest, ".log") && allDigits(rest[:8]) {
			mine = append(mine, e.Name())
		}
	}
	if len(mine) <= keptLogs {
		return
	}
	sort.Strings(mine) // oldest first
	for _, n := range mine[:len(mine)-keptLogs] {
		os.Remove(filepath.Join(dir, n))
	}
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// hostEnv is the host's environment without the variables a run sets.
func hostEnv() []string {
	env := os.Environ()
	out := env[:0:0]
	for _, kv := range env {
		if strings.HasPrefix(kv, "CLARA_CHANGED_FILES") || strings.HasPrefix(kv, "CLARA_PROJECT_ROOT=") ||
			strings.HasPrefix(kv, "CLARA_CALLBACK_NAME=") || strings.HasPrefix(kv, "CLARA_CALLBACK_ID=") ||
			strings.HasPrefix(kv, "CP_CHANGED_FILES=") || strings.HasPrefix(kv, "CP_PROJECT_ROOT=") ||
			strings.HasPrefix(kv, "CP_CALLBACK_NAME=") {
			continue
		}
		out = append(out, kv)
	}
	return out
}

func exitCode(ps *os.ProcessState, err error) int {
	if ps == nil {
		return -1
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// createLog creates logs/<name>-<time>.log, a new file.
func createLog(dir, name string) (*os.File, error) {
	ts := time.Now().UTC().Format("20060102T150405.000000000Z")
	for {
		base := fmt.Sprintf("%s-%s", name, ts)
		if n := logSeq.Add(1); n > 1 {
			base += "-" + strconv.FormatUint(n, 10)
		}
		f, err := os.OpenFile(filepath.Join(dir, base+".log"), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if errors.Is(err, os.ErrExist) {
			continue
		}
		return f, err
	}
}

// waitExitNoReap blocks until the process pid has exited, leaving it a
// zombie for cmd.Wait to reap (waitid with WNOWAIT).
func waitExitNoReap(pid int) {
	const (
		pPID    = 1
		wNoWait = 0x1000000
	)
	var info [128]byte // siginfo_t
	for {
		_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid), uintptr(unsafe.Pointer(&info[0])), syscall.WEXITED|wNoWait, 0, 0)
		if errno != syscall.EINTR {
			return
		}
	}
}

// signalSession sends sig to the run's process group and to every other
// process of its session (sid is the script's pid: it leads both), so
// that members that moved to a group of their own are reached too. It
// returns how many processes of the session were outside the group.
func signalSession(sid int, sig syscall.Signal) (strays int) {
	syscall.Kill(-sid, sig)
	buf := make([]byte, 512)
	for _, p := range sessionMembers(sid, false) {
		if _, pgrp, _, ok := procStat("/proc/"+strconv.Itoa(p)+"/stat", buf); ok && pgrp != strconv.Itoa(sid) {
			strays++
		}
		syscall.Kill(p, sig)
	}
	return strays
}

// waitGroupGone waits, at most limit, until no live process of the run's
// session sid is left: SIGKILL is delivered asynchronously. Killed members
// whose parent died are zombies until init reaps them, which is init's
// business (some inits take seconds); they do not count.
//
// The common case costs no scan of /proc: no member outside the group
// (strays, as signalSession counted them) and the group gone at once.
func waitGroupGone(sid, strays int, limit time.Duration) {
	deadline := time.Now().Add(limit)
	for d := 200 * time.Microsecond; ; d = min(2*d, 20*time.Millisecond) {
		if err := syscall.Kill(-sid, 0); strays == 0 && errors.Is(err, syscall.ESRCH) {
			return
		}
		// When the host is init or a subreaper, killed members whose parent
		// died are reparented to it: reap those, or they stay zombies. A
		// process that is not our child answers ECHILD.
		for _, p := range sessionMembers(sid, false) {
			var ws syscall.WaitStatus
			syscall.Wait4(p, &ws, syscall.WNOHANG, nil)
		}
		if len(sessionMembers(sid, true)) == 0 {
			return
		}
		if time.Now().After(deadline) {
			return
		}
		time.Sleep(d)
	}
}

// sessionMembers lists the processes of session sid found in /proc (live
// ones only, with liveOnly; zombies and the dead do not count then).
func sessionMembers(sid int, liveOnly bool) []int {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil
	}
	want := strconv.Itoa(sid)
	buf := make([]byte, 512)
	var out []int
	for _, n := range names {
		if n[0] < '0' || n[0] > '9' {
			continue
		}
		state, _, session, ok := procStat("/proc/"+n+"/stat", buf)
		if !ok || session != want || (liveOnly && (state == "Z" || state == "X")) {
			continue
		}
		if pid, err := strconv.Atoi(n); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// procStat reads the state, process group and session of a
// /proc/<pid>/stat file.
// Plain system calls: os.Open would also try to register each file with
// the poller, and a scan reads every process's file.
func procStat(path string, buf []byte) (state, pgrp, session string, ok bool) {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return "", "", "", false
	}
	n, err := syscall.Read(fd, buf)
	syscall.Close(fd)
	if err != nil || n <= 0 {
		return "", "", "", false
	}
	s := string(buf[:n])
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return "", "", "", false
	}
	fields := strings.Fields(s[i+1:]) // state ppid pgrp session ...
	if len(fields) < 4 {
		return "", "", "", false
	}
	return fields[0], fields[2], fields[3], true
}

// capture takes a run's output: the first logCap bytes to the log file,
// the rest drained and counted, and the end kept in memory for the tail.
type capture struct {
	f         *os.File
	written   int64
	truncated bool
	werr      error
	tail      []byte
}

func (c *capture) write(p []byte) {
	if len(p) == 0 {
		return
	}
	chunk := p
	if room := logCap - int64(len(truncMarker)) - c.written; int64(len(chunk)) > room {
		chunk = chunk[:max(room, 0)]
		c.truncated = true
	}
	if len(chunk) > 0 && c.werr == nil {
		n, err := c.f.Write(chunk)
		c.written += int64(n)
		c.werr = err
	}
	c.tail = append(c.tail, p...)
	if len(c.tail) > 2*tailKeep {
		c.tail = append(c.tail[:0], c.tail[len(c.tail)-tailKeep:]...)
	}
}

// truncMarker ends a log that reached the cap; room for it is kept, so a
// log is never longer than logCap.
const truncMarker = "\n[clara: output truncated at 1 MiB]\n"

// note appends a line of Clara's own to the log (room permitting) and the
// tail.
func (c *capture) note(line string) {
	line = "\n" + line + "\n"
	if c.werr == nil && c.written+int64(len(line)) <= logCap-int64(len(truncMarker)) {
		n, _ := io.WriteString(c.f, line)
		c.written += int64(n)
	}
	c.tail = append(c.tail, line...)
}

// tailText finishes the log and returns the last lines of output.
func (c *capture) tailText() string {
	if c.truncated && c.werr == nil {
		io.WriteString(c.f, truncMarker)
	}
	t := c.tail
	if len(t) > tailKeep {
		t = t[len(t)-tailKeep:]
	}
	s := strings.ToValidUTF8(strings.TrimRight(string(t), "\r\n"), "\uFFFD")
	if s == "" {
		return ""
	}
	lines := strings.Split(s, "\n")
	if len(lines) > tailLines {
		lines = lines[len(lines)-tailLines:]
	}
	for i, l := range lines {
		l = strings.TrimRight(l, "\r")
		if len(l) > tailLineMax {
			cut := len(l) - tailLineMax
			for cut < len(l) && (l[cut]&0xC0) == 0x80 {
				cut++
			}
			l = "…" + l[cut:]
		}
		lines[i] = l
	}
	return strings.Join(lines, "\n")
}
