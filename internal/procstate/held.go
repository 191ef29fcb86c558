package procstate

import (
	"fmt"
	"os/exec"
	"sync"
)

// Held is a test server's process while it runs (nil when stopped): what
// every test server's helper (redistest, etcdtest, zktest) keeps of its
// process, started, stopped and frozen the same way. The zero value holds
// none. Safe for concurrent use: each call holds it for its whole length.
type Held struct {
	mu sync.Mutex
	p  *Proc
}

// Start starts cmd and holds its process once ready (nil: at once) says
// it serves; a process ready refuses is killed and not held. what names
// the server in Start's own error ("etcd m1").
func (h *Held) Start(cmd *exec.Cmd, what string, ready func(*Proc) error) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	p, err := Start(cmd)
	if err != nil {
		return fmt.Errorf("start %s: %w", what, err)
	}
	if ready != nil {
		if err := ready(p); err != nil {
			p.Kill()
			return err
		}
	}
	h.p = p
	return nil
}

// Running says whether a process is held.
func (h *Held) Running() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.p != nil
}

// Exited is closed once the held process has exited (at once when none is
// held).
func (h *Held) Exited() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.p.Exited()
}

// Stop kills the held process (as a crash would) and waits for it to exit.
// It is safe to call more than once.
func (h *Held) Stop() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.p.Kill()
	h.p = nil
}

// Freeze freezes the held process (Proc.Freeze) or, with frozen false,
// resumes it; a frozen one is resumed at cleanup (a test's Cleanup). It
// answers false, doing nothing, when none is held.
func (h *Held) Freeze(frozen bool, cleanup func(func())) (bool, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.p == nil {
		return false, nil
	}
	if frozen {
		p := h.p
		cleanup(func() { _ = p.Freeze(false) })
	}
	return true, h.p.Freeze(frozen)
}
