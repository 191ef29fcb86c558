package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// cpuTimes are the machine's CPU times from /proc/stat's first line.
type cpuTimes struct{ idle, total float64 }

func readCPU() (cpuTimes, error) {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuTimes{}, fmt.Errorf("the machine's CPU times: %w", err)
	}
	line, _, _ := strings.Cut(string(raw), "\n")
	fields := strings.Fields(line)
	if len(fields) < 5 || fields[0] != "cpu" {
		return cpuTimes{}, fmt.Errorf("the machine's CPU times: /proc/stat starts %q", line)
	}
	var t cpuTimes
	for i, f := range fields[1:min(len(fields), 9)] { // user to steal: guest time is counted in user already
		v, err := strconv.ParseFloat(f, 64)
		if err != nil {
			return cpuTimes{}, fmt.Errorf("the machine's CPU times: %q: %w", line, err)
		}
		t.total += v
		if i == 3 || i == 4 { // idle, iowait
			t.idle += v
		}
	}
	return t, nil
}

// idleSince is the share of the CPU time since o that was idle.
func (t cpuTimes) idleSince(o cpuTimes) float64 {
	if t.total <= o.total {
		return 0
	}
	return (t.idle - o.idle) / (t.total - o.total)
}
