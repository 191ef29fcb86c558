package procstate

import (
	"bufio"
	"errors"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A process its ready refuses is killed and not held; one it accepts is
// held until Stop, which may be called again; a held process frozen is
// stopped, and resumed by the cleanup it registered.
func TestHeld(t *testing.T) {
	var h Held
	if running, err := h.Freeze(true, t.Cleanup); running || err != nil {
		t.Fatalf("Freeze holding none: running %v, err %v", running, err)
	}
	var refused *Proc
	no := errors.New("not ready")
	if err := h.Start(exec.Command("sleep", "300"), "sleep", func(p *Proc) error { refused = p; return no }); !errors.Is(err, no) {
		t.Fatalf("Start refused by ready: %v", err)
	}
	select {
	case <-refused.Exited():
	case <-time.After(10 * time.Second):
		t.Fatal("the process ready refused still runs")
	}
	if h.Running() {
		t.Fatal("a process ready refused is held")
	}
	if err := h.Start(exec.Command("no-such-binary-here"), "nothing", nil); err == nil || err.Error()[:14] != "start nothing:" {
		t.Fatalf("Start of a missing binary: %v", err)
	}
	if err := h.Start(exec.Command("sleep", "300"), "sleep", nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Stop)
	var resume []func()
	if running, err := h.Freeze(true, func(f func()) { resume = append(resume, f) }); !running || err != nil {
		t.Fatalf("Freeze: running %v, err %v", running, err)
	}
	h.mu.Lock()
	pid := h.p.Pid()
	h.mu.Unlock()
	if stopped, err := Stopped(pid); err != nil || !stopped || len(resume) != 1 {
		t.Fatalf("after Freeze: stopped %v, err %v, %d cleanups", stopped, err, len(resume))
	}
	resume[0]()
	if st, err := State(pid); err != nil || st == 'T' {
		t.Fatalf("after the cleanup: state %q, err %v", st, err)
	}
	exited := h.Exited()
	h.Stop()
	select {
	case <-exited:
	default:
		t.Fatal("Stop returned before the process exited")
	}
	h.Stop() // again: nothing held, nothing to do
	if h.Running() {
		t.Fatal("held after Stop")
	}
}

// A process started in a group of its own is killed with its group: a
// child it started is gone too (mariadbd's helpers).
func TestKillGroup(t *testing.T) {
	cmd := exec.Command("sh", "-c", "sleep 300 & echo $!; wait")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p, err := Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Kill)
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	child, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(child, syscall.SIGKILL) })
	p.Kill()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		// Killed, the child is a zombie until init reaps it, or gone.
		if st, err := State(child); err != nil || st == 'Z' || st == 'X' {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the group's child %d still runs after Kill", child)
		}
	}
}
