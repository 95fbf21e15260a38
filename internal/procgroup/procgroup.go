package procgroup

import (
	"errors"
	"os/exec"
	"os/user"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Process is a restartable server: one run at a time, each a process
// group. The zero value is ready to use.
type Process struct {
	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

// Start starts cmd as p's run, in a process group of its own
// (SysProcAttr.Setpgid; its other fields are kept), and reaps it when it
// exits. p must not be running.
func (p *Process) Start(cmd *exec.Cmd) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		return errors.New("procgroup: already running")
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	p.cmd, p.exited = cmd, exited
	return nil
}

// Running reports whether p has a run that was neither killed nor
// stopped (it may have exited on its own).
func (p *Process) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd != nil
}

// take ends p's run for the caller, which waits for it.
func (p *Process) take() (*exec.Cmd, chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	cmd, exited := p.cmd, p.exited
	p.cmd, p.exited = nil, nil
	return cmd, exited
}

// Kill sends SIGKILL to the process group of p's run and returns once its
// leader exited and nothing of the group is left (10 s at most: a
// server's children notice their parent's death on their own), so that a
// restart finds its ports free. It reports whether p was running.
func (p *Process) Kill() bool {
	cmd, exited := p.take()
	if cmd == nil {
		return false
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	<-exited
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if err := syscall.Kill(-cmd.Process.Pid, 0); errors.Is(err, syscall.ESRCH) {
			break
		}
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	return true
}

// Signal sends sig to the leader of p's run.
func (p *Process) Signal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return errors.New("procgroup: not running")
	}
	return p.cmd.Process.Signal(sig)
}

// Stopped ends p's run once it was asked to stop (a signal, the server's
// own stop command): it waits up to timeout for the leader to exit and
// reports whether it did. A p that is not running has stopped.
func (p *Process) Stopped(timeout time.Duration) bool {
	cmd, exited := p.take()
	if cmd == nil {
		return true
	}
	select {
	case <-exited:
		return true
	case <-time.After(timeout):
		return false
	}
}

// Credential is the user and group of the account name, for
// SysProcAttr.Credential: how a test run as root runs a server that
// refuses root (initdb, pg_autoctl) or should not run as root (mariadbd).
func Credential(name string) (*syscall.Credential, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return nil, err
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, err
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, err
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}
