package sale_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/chaos"
	"github.com/locklab/locklab/internal/locks/retry"
	mutex "github.com/locklab/locklab/internal/locks/v1_mutex"
	"github.com/locklab/locklab/internal/redistest"
	"github.com/locklab/locklab/internal/sale"
)

// A write that was to leave with a release that sends nothing (a lock held
// in the process, said to ride) is never sent after the release: the sale
// fails, nothing sold, the stock untouched.
func TestWriteNeverFollowsTheRelease(t *testing.T) {
	rdb := redistest.Start(t).Client()
	setStock(t, rdb, 5)
	svc := sale.New(rdb, sale.Options{Key: key})
	m := sale.Method{Name: "v1", Lock: retry.Local(mutex.New(), nil), Rides: true}
	res, err := svc.Sell(context.Background(), m)
	if err == nil || !strings.Contains(err.Error(), "nothing sold") {
		t.Fatalf("sale with a release that sent nothing: %v, want its write refused", err)
	}
	if got := stock(t, rdb); got != 5 || res.Trace.Written.At != (time.Time{}) {
		t.Fatalf("stock %d (want 5), written at %v (want never)", got, res.Trace.Written.At)
	}
}

// A pause asked inside the release (the release-race scenario's) would
// delay a write riding with it past the pause, where the lease may have run
// out: then the write goes before the release, on its own, as always.
func TestPausedReleaseWritesFirst(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	setStock(t, rdb, 5)
	hook := &rides{}
	r := newReplica(t, srv, "a", false, hook)
	paused := false
	ctx := chaos.With(context.Background(), chaos.Faults{BeforeDelete: func(context.Context) {
		paused = true
		if got := stock(t, rdb); got != 4 {
			t.Errorf("stock %d when the release paused, want the write (4) done before it", got)
		}
	}})
	if _, err := r.svc.Sell(ctx, r.m); err != nil {
		t.Fatal(err)
	}
	if !paused || hook.writes.Load() != 0 {
		t.Fatalf("paused %v, %d writes left with the release: want the pause, and the write on its own", paused, hook.writes.Load())
	}
}
