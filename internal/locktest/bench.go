package locktest

import (
	"context"
	"strconv"
	"testing"
)

// BenchAcquireRelease measures one uncontended acquire and release of g per
// operation (against whatever Redis g talks to), so that a change's effect on
// a guard shows with benchstat.
func BenchAcquireRelease(b *testing.B, g Locker) {
	b.Helper()
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		l, err := g.Acquire(ctx, "bench-"+strconv.Itoa(i))
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
