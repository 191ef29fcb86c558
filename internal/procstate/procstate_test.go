package procstate

import (
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A real multi-threaded process (redis-server: its main thread and its
// background threads) is stopped, every thread, when Stop returns, and
// runs again after SIGCONT.
func TestStop(t *testing.T) {
	cmd := exec.Command("redis-server", "--port", "0", "--save", "", "--appendonly", "no")
	if err := cmd.Start(); err != nil {
		t.Fatalf("redis-server: %v (apt-get install redis-server)", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	pid := cmd.Process.Pid
	if stopped, err := Stopped(pid); err != nil || stopped {
		t.Fatalf("a running process: stopped %v, err %v", stopped, err)
	}
	if err := Stop(pid, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if stopped, err := Stopped(pid); err != nil || !stopped {
		t.Fatalf("after Stop: stopped %v, err %v", stopped, err)
	}
	if st, err := State(pid); err != nil || st != 'T' {
		t.Fatalf("after Stop: state %q, err %v", st, err)
	}
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if stopped, err := Stopped(pid); err == nil && !stopped {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("still stopped 10 s after SIGCONT")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestStatState(t *testing.T) {
	for raw, want := range map[string]byte{
		"12 (redis-server) S 1 2":   'S',
		"12 (a) b) (c) T 1 2":       'T',
		"12 (name with spaces) R 1": 'R',
	} {
		if got, err := statState([]byte(raw)); err != nil || got != want {
			t.Errorf("%q: %q, %v; want %q", raw, got, err, want)
		}
	}
	if _, err := statState([]byte("12 (x")); err == nil {
		t.Error("a line with no state read without an error")
	}
}

// A Proc killed is gone, Exited says so, and killing it again, or a nil
// one, does nothing.
func TestProcKill(t *testing.T) {
	p, err := Start(exec.Command("redis-server", "--port", "0", "--save", "", "--appendonly", "no"))
	if err != nil {
		t.Fatalf("redis-server: %v (apt-get install redis-server)", err)
	}
	if err := p.Freeze(true); err != nil {
		t.Fatal(err)
	}
	p.Kill() // a frozen process dies of SIGKILL too
	select {
	case <-p.Exited():
	default:
		t.Fatal("Exited open after Kill")
	}
	if err := syscall.Kill(p.Pid(), 0); err == nil {
		t.Fatalf("pid %d still exists after Kill", p.Pid())
	}
	p.Kill()
	var none *Proc
	none.Kill()
	<-none.Exited()
}

// A process that has exited but is not reaped (a zombie) is said to have
// exited, at once, not waited for as if it might still stop.
func TestZombieIsNotStopped(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Wait() })
	pid := cmd.Process.Pid
	deadline := time.Now().Add(10 * time.Second)
	for {
		if st, err := State(pid); err == nil && st == 'Z' {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("true did not exit within 10 s")
		}
		time.Sleep(time.Millisecond) // polling the observable state: its state
	}
	start := time.Now()
	if err := WaitStopped(pid, 10*time.Second); err == nil || !strings.Contains(err.Error(), "exited") || time.Since(start) > time.Second {
		t.Fatalf("a zombie: %v after %s, want at once that it has exited", err, time.Since(start))
	}
}
