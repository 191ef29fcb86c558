package procstate

import (
	"os"
	"os/exec"
	"syscall"
	"time"
)

// Proc is a server process a test helper started (redis-server, etcd,
// ZooKeeper): killed as a crash would, frozen and resumed, and telling when
// it has exited.
type Proc struct {
	p      *os.Process
	exited chan struct{}
}

// Start starts cmd and watches for its exit.
func Start(cmd *exec.Cmd) (*Proc, error) {
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &Proc{p: cmd.Process, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.exited) }()
	return p, nil
}

// Pid is the process's id.
func (p *Proc) Pid() int { return p.p.Pid }

// Exited is closed once the process has exited (at once for a nil Proc:
// one its holder killed).
func (p *Proc) Exited() <-chan struct{} {
	if p == nil {
		gone := make(chan struct{})
		close(gone)
		return gone
	}
	return p.exited
}

// Kill kills the process with SIGKILL (no clean shutdown: a crash) and waits
// until it has exited. A nil Proc (never started, or already killed by its
// holder) is nothing to kill.
func (p *Proc) Kill() {
	if p == nil {
		return
	}
	_ = p.p.Signal(syscall.SIGKILL)
	<-p.exited
}

// Freeze stops the process until every thread is stopped (it answers
// nothing, its ports still accept connections) or, with frozen false,
// resumes it.
func (p *Proc) Freeze(frozen bool) error {
	if !frozen {
		return p.p.Signal(syscall.SIGCONT)
	}
	// Through the os.Process (a pidfd where there is one): never a pid
	// reused after this process was reaped.
	if err := p.p.Signal(syscall.SIGSTOP); err != nil {
		return err
	}
	return WaitStopped(p.p.Pid, 10*time.Second)
}
