//go:build !linux

package chaos

import (
	"os"
	"syscall"
)

// stopSelf sends SIGSTOP to the process. Without a thread-directed kill the
// calling goroutine may run on for a moment before the process stops.
func stopSelf() { _ = syscall.Kill(os.Getpid(), syscall.SIGSTOP) }
