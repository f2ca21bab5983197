//go:build unix

package mcp

import (
	"os/exec"
	"syscall"
	"time"
)

// process is a stdio server's child. It leads a process group of its own,
// so that what it starts (npx starts node, a shell starts its commands)
// can be ended with it, and a terminal's signals reach Clara, not it.
type process struct {
	cmd *exec.Cmd
}

func newProcess(cmd *exec.Cmd) *process {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// A grandchild that keeps stderr open must not hold Wait forever.
	cmd.WaitDelay = 2 * time.Second
	return &process{cmd: cmd}
}

// kill ends whatever is left of the process group. The SDK has already
// closed the child's stdin, waited, and signalled the child itself; the
// group outlives it only through what it started.
func (p *process) kill() {
	if p == nil || p.cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
}

// pid is the child's process id, 0 before it started.
func (p *process) pid() int {
	if p == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}
