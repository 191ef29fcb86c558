// Package procstate reads a process's state and stops one for good: the
// fault tests and the cluster freeze real servers with SIGSTOP, and a
// SIGSTOP is not done when kill returns. The kernel wakes one thread to
// take it, and that thread stops the others; until they are stopped the
// process still reads its sockets and can answer a request sent right
// after (seen in CI: a "frozen" etcd answered a read on a busy machine).
package procstate

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// State is pid's state letter (R, S, T stopped, Z zombie, ...): from /proc
// where there is one, from ps elsewhere.
func State(pid int) (byte, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if errors.Is(err, os.ErrNotExist) {
		raw, err = exec.Command("ps", "-o", "stat=", "-p", strconv.Itoa(pid)).Output()
		if s := strings.TrimSpace(string(raw)); err == nil && s != "" {
			return s[0], nil
		}
		return 0, fmt.Errorf("state of pid %d: %w", pid, err)
	}
	if err != nil {
		return 0, err
	}
	return statState(raw)
}

// statState is the state in a /proc stat line: "pid (comm) S ...", where
// comm may hold spaces and parentheses, so it is read after the last ')'.
func statState(raw []byte) (byte, error) {
	i := strings.LastIndexByte(string(raw), ')')
	if i < 0 || i+2 >= len(raw) {
		return 0, fmt.Errorf("no state in %q", raw)
	}
	return raw[i+2], nil
}

// Stopped reports whether every thread of pid is stopped (T, or t when
// traced). Without /proc (not Linux) it reads the process's state alone.
func Stopped(pid int) (bool, error) {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tids, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		if _, serr := os.Stat("/proc/self"); serr == nil {
			return false, fmt.Errorf("pid %d: %w", pid, err) // gone
		}
		st, err := State(pid)
		return st == 'T', err
	}
	if err != nil {
		return false, err
	}
	// A process that has exited (a zombie nobody reaped yet) will never
	// stop: said as an error, not as a wait that times out.
	if st, err := State(pid); err == nil && (st == 'Z' || st == 'X') {
		return false, fmt.Errorf("pid %d has exited", pid)
	}
	for _, tid := range tids {
		raw, err := os.ReadFile(filepath.Join(dir, tid.Name(), "stat"))
		if errors.Is(err, os.ErrNotExist) {
			continue // the thread exited meanwhile
		}
		if err != nil {
			return false, err
		}
		st, err := statState(raw)
		if err != nil {
			return false, err
		}
		if st != 'T' && st != 't' && st != 'Z' && st != 'X' { // an exited thread stops nothing
			return false, nil
		}
	}
	return true, nil
}

// Stop sends SIGSTOP to pid and waits, for at most limit, until every one of
// its threads is stopped: only then does it answer nothing.
func Stop(pid int, limit time.Duration) error {
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		return fmt.Errorf("stop pid %d: %w", pid, err)
	}
	return WaitStopped(pid, limit)
}

// WaitStopped waits, for at most limit, until every thread of pid, sent a
// SIGSTOP, is stopped.
func WaitStopped(pid int, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		stopped, err := Stopped(pid)
		if err != nil {
			return fmt.Errorf("stop pid %d: %w", pid, err)
		}
		if stopped {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("stop pid %d: threads still running %s after SIGSTOP", pid, limit)
		}
		time.Sleep(time.Millisecond) // polling the observable state: the threads' states
	}
}
