//go:build !unix

package mcp

import "os/exec"

type process struct {
	cmd *exec.Cmd
}

func newProcess(cmd *exec.Cmd) *process { return &process{cmd: cmd} }

func (p *process) kill() {
	if p != nil && p.cmd.Process != nil {
		_ = p.cmd.Process.Kill()
	}
}

func (p *process) pid() int {
	if p == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}
