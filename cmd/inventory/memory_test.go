package main

import (
	"runtime/debug"
	"testing"
)

// The default limit is set only when GOMEMLIMIT sets none: the environment
// wins, "off" included.
func TestMemoryLimit(t *testing.T) {
	was := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(was) })
	const theirs = 1 << 40
	for name, tc := range map[string]struct {
		env  string
		want int64
	}{
		"unset": {"", memoryLimit},
		"set":   {"1TiB", theirs}, // the runtime read it at start; here, as if it had
	} {
		t.Run(name, func(t *testing.T) {
			debug.SetMemoryLimit(theirs)
			setMemoryLimit(func(k string) string {
				if k == "GOMEMLIMIT" {
					return tc.env
				}
				return ""
			})
			if got := debug.SetMemoryLimit(-1); got != tc.want {
				t.Fatalf("limit %d, want %d", got, tc.want)
			}
		})
	}
}
