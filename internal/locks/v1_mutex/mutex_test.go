package mutex_test

import (
	"context"
	"testing"

	mutex "github.com/locklab/locklab/internal/locks/v1_mutex"
	"github.com/locklab/locklab/internal/locktest"
	"github.com/locklab/locklab/internal/redistest"
)

// Inside one process the mutex excludes: every goroutine shares it.
func TestExcludesWithinOneProcess(t *testing.T) {
	rdb := redistest.Start(t).Client()
	m := mutex.New()
	locktest.Exclusion(t, rdb, m, m)
}

// Two replicas each have their own mutex: both grant at once and an update is
// lost. This is v1's (and v2's) lesson.
func TestLosesUpdatesAcrossInstances(t *testing.T) {
	rdb := redistest.Start(t).Client()
	locktest.LostUpdate(t, rdb, mutex.New(), mutex.New())
}

func TestWaitEndsWithContext(t *testing.T) {
	m := mutex.New()
	release, err := m.Acquire(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	defer release(context.Background())
	locktest.Waits(t, m, "b")
}

func BenchmarkAcquireRelease(b *testing.B) { locktest.BenchAcquireRelease(b, mutex.New()) }
