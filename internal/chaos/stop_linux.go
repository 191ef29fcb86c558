package chaos

import (
	"os"
	"runtime"
	"syscall"
)

// stopSelf sends SIGSTOP to the calling thread (tgkill), so that this very
// thread starts the group stop on its way back from the system call and the
// goroutine goes no further. A process-directed kill(getpid()) lets the
// kernel pick another thread to start the stop, and the caller runs on for a
// moment: measured, the sale's write landed before the process stopped.
func stopSelf() {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	_ = syscall.Tgkill(os.Getpid(), syscall.Gettid(), syscall.SIGSTOP)
}
