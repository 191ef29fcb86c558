package mutex_test

import (
	"context"
	"errors"
	"testing"

	"github.com/locklab/locklab/internal/lease"
	"github.com/locklab/locklab/internal/locks/retry"
	mutex "github.com/locklab/locklab/internal/locks/v1_mutex"
	"github.com/locklab/locklab/internal/locktest"
	"github.com/locklab/locklab/internal/redistest"
)

// local is a process mutex as the service waits for it.
func local() locktest.Locker { return retry.Local(mutex.New(), nil) }

// Inside one process the mutex excludes: every goroutine shares it.
func TestExcludesWithinOneProcess(t *testing.T) {
	rdb := redistest.Start(t).Client()
	m := local()
	locktest.Exclusion(t, rdb, m, m)
}

// Two replicas each have their own mutex: both grant at once and an update is
// lost. This is v1's (and v2's) lesson.
func TestLosesUpdatesAcrossInstances(t *testing.T) {
	rdb := redistest.Start(t).Client()
	locktest.LostUpdate(t, rdb, local(), local())
}

// One attempt: taken is lease.ErrTaken, at once.
func TestTryAcquire(t *testing.T) {
	ctx := context.Background()
	m := mutex.New()
	l, err := m.TryAcquire(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.TryAcquire(ctx, "b"); !errors.Is(err, lease.ErrTaken) {
		t.Fatalf("while held: err = %v, want lease.ErrTaken", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := m.TryAcquire(ctx, "b"); err != nil {
		t.Fatalf("after release: %v", err)
	}
}

func TestWaitEndsWithContext(t *testing.T) {
	m := local()
	l, err := m.Acquire(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(context.Background())
	locktest.Waits(t, m, "b")
}

func BenchmarkAcquireRelease(b *testing.B) { locktest.BenchAcquireRelease(b, local()) }
