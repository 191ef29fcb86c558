package cluster

import (
	"context"
	_ "embed"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// The clock shim (FAULTS=1): each Redis node runs with clockjump/clockjump.c
// preloaded, which adds the offset in the node's clock file to its wall
// clock, so that a scenario can make one node's clock jump (seed 003's "C").
// Why a shim of our own and not libfaketime: see the C file.

//go:embed clockjump/clockjump.c
var clockShimSource []byte

const clockFileEnv = "LOCKLAB_CLOCK_FILE="

func clockShim(dir string) string { return filepath.Join(dir, "bin", "clockjump.so") }

func clockFile(dir, node string) string { return filepath.Join(dir, node+".clock") }

// planClock runs each Redis node with the shim and its own clock file.
func planClock(dir string, s *State) {
	for i, n := range s.Redis {
		s.Redis[i].Env = append(n.Env, "LD_PRELOAD="+clockShim(dir), clockFileEnv+clockFile(dir, n.Name))
	}
}

// buildClockShim compiles the shim into dir/bin and sets every node's clock
// file to no offset (a file left by an earlier run may hold one).
func buildClockShim(ctx context.Context, dir string, nodes []Proc) error {
	src := filepath.Join(dir, "bin", "clockjump.c")
	if err := os.MkdirAll(filepath.Dir(src), 0o700); err != nil {
		return err
	}
	if err := writePrivate(src, clockShimSource); err != nil {
		return err
	}
	if out, err := exec.CommandContext(ctx, "cc", "-shared", "-fPIC", "-O2", "-o", clockShim(dir), src).CombinedOutput(); err != nil {
		return fmt.Errorf("cluster: building the clock shim (cc %s): %w: %s", src, err, out)
	}
	for _, n := range nodes {
		if err := writeOffset(clockFile(dir, n.Name), 0); err != nil {
			return err
		}
	}
	return nil
}

// JumpClock sets the wall clock of the Redis node named name to the real
// time plus d, at once (d = 0: the real time again). The node must run with
// the clock shim: a cluster started with FAULTS=1.
func (c *Cluster) JumpClock(name string, d time.Duration) error {
	p, err := c.proc(name)
	if err != nil {
		return err
	}
	for _, kv := range p.Env {
		if path, ok := strings.CutPrefix(kv, clockFileEnv); ok {
			return writeOffset(path, d)
		}
	}
	return fmt.Errorf("cluster: %s has no clock to move: start the cluster with FAULTS=1", name)
}

// writeOffset writes d into a clock file: microseconds, a little-endian
// int64, in place (the node has the file mapped).
func writeOffset(path string, d time.Duration) error {
	f, err := openPrivate(path, os.O_WRONLY|os.O_CREATE)
	if err != nil {
		return fmt.Errorf("cluster: clock file: %w", err)
	}
	_, err = f.WriteAt(binary.LittleEndian.AppendUint64(nil, uint64(d.Microseconds())), 0)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("cluster: clock file %s: %w", path, err)
	}
	return nil
}
