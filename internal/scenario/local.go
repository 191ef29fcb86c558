package scenario

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// LocalReplicas are the local cluster's first two replicas' /sale endpoints
// (deploy/local/cluster.sh starts them on 8080 and 8081).
var LocalReplicas = [2]string{"http://127.0.0.1:8080/sale", "http://127.0.0.1:8081/sale"}

// Local controls the processes of the local cluster whose pid files are in
// RunDir, started by Script (deploy/local/cluster.sh).
type Local struct {
	RunDir string
	Script string
}

// The local cluster's Redis nodes: the stock's and single-node locks' node,
// and one that only redlock uses.
const (
	stockNode = 6381
	spareNode = 6383
)

func (l Local) pidFile(i int) string {
	return filepath.Join(l.RunDir, fmt.Sprintf("inventory-%d.pid", i+1))
}

// pidOf reads RunDir/NAME.pid.
func (l Local) pidOf(name string) (int, error) {
	raw, err := os.ReadFile(filepath.Join(l.RunDir, name+".pid"))
	if err != nil {
		return 0, fmt.Errorf("scenario: %s: %w (is the local cluster up with this run directory?)", name, err)
	}
	return strconv.Atoi(strings.TrimSpace(string(raw)))
}

func (l Local) pid(i int) (int, error) { return l.pidOf(fmt.Sprintf("inventory-%d", i+1)) }

// signal sends sig to the process of RunDir/NAME.pid.
func (l Local) signal(name string, sig syscall.Signal) error {
	pid, err := l.pidOf(name)
	if err != nil {
		return err
	}
	if err := syscall.Kill(pid, sig); err != nil {
		return fmt.Errorf("scenario: %s %s (pid %d): %w", sig, name, pid, err)
	}
	return nil
}

func stopOrCont(frozen bool) syscall.Signal {
	if frozen {
		return syscall.SIGSTOP
	}
	return syscall.SIGCONT
}

// Freeze stops replica i's process (SIGSTOP: its watchdogs too) or resumes it.
func (l Local) Freeze(i int, frozen bool) error {
	return l.signal(fmt.Sprintf("inventory-%d", i+1), stopOrCont(frozen))
}

// FreezeStockNode stops the stock's Redis node (SIGSTOP: it answers nothing,
// and keeps its data) or resumes it.
func (l Local) FreezeStockNode(frozen bool) error {
	return l.signal(fmt.Sprintf("redis-%d", stockNode), stopOrCont(frozen))
}

// CrashSpareNode kills the node only redlock uses, and returns what starts it
// again (empty: no persistence) through the cluster script.
func (l Local) CrashSpareNode() (restart func(context.Context) error, err error) {
	name := fmt.Sprintf("redis-%d", spareNode)
	pid, err := l.pidOf(name)
	if err != nil {
		return nil, err
	}
	if err := l.signal(name, syscall.SIGKILL); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		// Gone before it is started again, or the new one could not bind.
		for syscall.Kill(pid, 0) == nil {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(5 * time.Millisecond):
			}
		}
		cmd := exec.CommandContext(ctx, "bash", l.Script, "start-redis", strconv.Itoa(spareNode))
		cmd.Env = append(os.Environ(), "RUN_DIR="+l.RunDir)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("scenario: restart %s: %w: %s", name, err, out)
		}
		return nil
	}, nil
}

// Crash kills replica i with SIGKILL, as a crash would: no release, no
// watchdog stop, nothing. It returns the function that starts it again as it
// was (same arguments, environment and log file) and waits until it is ready.
func (l Local) Crash(i int) (restart func(ctx context.Context) error, err error) {
	pid, err := l.pid(i)
	if err != nil {
		return nil, err
	}
	proc := func(name string) ([]string, error) {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, name))
		if err != nil {
			return nil, fmt.Errorf("scenario: replica %d: %w", i+1, err)
		}
		return strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00"), nil
	}
	args, err := proc("cmdline")
	if err != nil {
		return nil, err
	}
	env, err := proc("environ")
	if err != nil {
		return nil, err
	}
	logPath, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/2", pid))
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return nil, fmt.Errorf("scenario: SIGKILL replica %d (pid %d): %w", i+1, pid, err)
	}
	return func(ctx context.Context) error { return l.start(ctx, i, args, env, logPath) }, nil
}

func (l Local) start(ctx context.Context, i int, args, env []string, logPath string) error {
	var logFile *os.File
	if filepath.IsAbs(logPath) {
		f, err := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			return err
		}
		defer f.Close()
		logFile = f
	}
	newCmd := func() *exec.Cmd {
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Env = env
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // outlives this program, as cluster.sh's replicas do
		if logFile != nil {
			cmd.Stdout, cmd.Stderr = logFile, logFile
		}
		return cmd
	}
	// The killed process's port is free once the kernel has reaped it; retry
	// the start until it binds.
	readyURL := strings.TrimSuffix(LocalReplicas[i], "/sale") + "/readyz"
	deadline := time.Now().Add(10 * time.Second)
	for {
		c := newCmd()
		if err := c.Start(); err != nil {
			return fmt.Errorf("scenario: restart replica %d: %w", i+1, err)
		}
		if err := os.WriteFile(l.pidFile(i), []byte(strconv.Itoa(c.Process.Pid)+"\n"), 0o644); err != nil {
			return err
		}
		exited := make(chan struct{})
		go func() { _ = c.Wait(); close(exited) }()
		for {
			select {
			case <-exited:
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(20 * time.Millisecond):
				if ready(readyURL) {
					return nil
				}
				continue
			}
			break // it exited (port still taken): start it again
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("scenario: replica %d did not come back within 10s", i+1)
		}
	}
}

func ready(u string) bool {
	res, err := http.Get(u)
	if err != nil {
		return false
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, res.Body)
	return res.StatusCode == http.StatusOK
}
