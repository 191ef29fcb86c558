package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/locklab/locklab/internal/cluster"
)

// What the bench reads of this machine and of the replicas' processes.

// replicaMemory reads each replica's peak resident memory (VmHWM): the most
// it has used since it started.
func replicaMemory(reps []cluster.Proc) (map[string]float64, error) {
	mem := map[string]float64{}
	for _, r := range reps {
		status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", r.Pid))
		if err != nil {
			return nil, fmt.Errorf("replica %s: %w", r.Name, err)
		}
		for line := range strings.SplitSeq(string(status), "\n") {
			if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
				kb, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
				if err != nil {
					return nil, fmt.Errorf("replica %s: VmHWM %q: %w", r.Name, v, err)
				}
				mem[r.Name] = kb / 1024
			}
		}
	}
	return mem, nil
}

// machine describes this machine for the report.
func machine() string {
	model := "unknown CPU"
	if raw, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(raw), "\n") {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				model = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	return fmt.Sprintf("%s, %d cores, %s/%s", model, runtime.NumCPU(), runtime.GOOS, runtime.GOARCH)
}
