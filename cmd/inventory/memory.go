package main

import (
	"runtime/debug"
)

// memoryLimit is the runtime's soft memory limit a replica sets itself
// when GOMEMLIMIT does not (issue 48: each replica under 50 MB of peak
// resident memory over a whole make bench). A replica's resident memory is
// about 24 MB of its own binary's pages (the code and tables of every lock's
// client, all used in a bench) and the Go runtime's memory, which this
// limit bounds: the heap, live at 10-15 MB after every version's load, the
// goroutines' stacks and the collector's own. With GOGC's default alone the
// heap grew to twice its live size before a collection, which took the
// replicas to 54-57 MB; under the limit the collector runs earlier when the
// heap nears it, and not at all more often while it is far below. It is soft:
// a replica whose live heap outgrows it spends more CPU on collections (the
// runtime caps that at about half), it is never stopped.
const memoryLimit = 24 << 20

// setMemoryLimit gives the runtime memoryLimit unless GOMEMLIMIT (which the
// runtime has read already) sets another, "off" included.
func setMemoryLimit(getenv func(string) string) {
	if getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(memoryLimit)
	}
}
