package retry_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/lease"
	"github.com/locklab/locklab/internal/locks/retry"
	mutex "github.com/locklab/locklab/internal/locks/v1_mutex"
)

// scripted is a guard whose attempts answer as results says, in turn (the
// last one repeating): nil obtains, lease.ErrTaken is taken, else a failure.
type scripted struct {
	t       *testing.T
	results []error
	tries   int
}

func (s *scripted) TryAcquire(ctx context.Context, _ string) (lease.Lease, error) {
	if ctx.Err() != nil {
		s.t.Error("an attempt ran with a cancelled context: its outcome would be unknown")
	}
	r := s.results[min(s.tries, len(s.results)-1)]
	s.tries++
	if r != nil {
		return nil, r
	}
	return lease.New(func(context.Context) error { return nil }, 0, nil), nil
}

func TestPoll(t *testing.T) {
	boom := errors.New("boom")
	taken := lease.ErrTaken
	for name, tc := range map[string]struct {
		results []error
		ctx     func() (context.Context, context.CancelFunc)
		want    error
		tries   int
	}{
		"obtained at once":   {results: []error{nil}, tries: 1},
		"obtained after two": {results: []error{taken, taken, nil}, tries: 3},
		"failure ends it":    {results: []error{taken, boom}, want: boom, tries: 2},
		"deadline": {results: []error{taken}, want: context.DeadlineExceeded,
			ctx: func() (context.Context, context.CancelFunc) {
				return context.WithTimeout(context.Background(), 10*time.Millisecond)
			}},
		"caller gone": {results: []error{taken}, want: context.Canceled, tries: 1,
			ctx: func() (context.Context, context.CancelFunc) {
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				return ctx, cancel
			}},
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.Background(), context.CancelFunc(func() {})
			if tc.ctx != nil {
				ctx, cancel = tc.ctx()
			}
			defer cancel()
			g := &scripted{t: t, results: tc.results}
			counted := -1
			_, err := retry.Poll(g, time.Millisecond, func(n int) { counted = n }).Acquire(ctx, "owner")
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if tc.tries > 0 && g.tries != tc.tries {
				t.Fatalf("%d attempts, want %d", g.tries, tc.tries)
			}
			if counted != g.tries {
				t.Fatalf("counter told %d attempts, the guard saw %d", counted, g.tries)
			}
			// A wait that ran out says how many attempts were refused.
			if tc.want != nil && tc.want != boom && !strings.Contains(err.Error(), fmt.Sprintf("after %d attempts", g.tries)) {
				t.Fatalf("err = %v: want it to say the %d attempts", err, g.tries)
			}
		})
	}
}

// A zero interval is the default, never a tight loop.
func TestPollZeroIntervalIsTheDefault(t *testing.T) {
	g := &scripted{t: t, results: []error{lease.ErrTaken}}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, _ = retry.Poll(g, 0, nil).Acquire(ctx, "owner")
	// 100 ms at a mean of 20 ms (each wait 10-30 ms): at most 11 attempts.
	if g.tries > 11 {
		t.Fatalf("%d attempts in 100 ms with interval 0: want the 20 ms default, not a tight loop", g.tries)
	}
}

// Local waits for the release of the lock in this process, not for a timer:
// a waiter is served as soon as the holder releases.
func TestLocalWakesAtRelease(t *testing.T) {
	ctx := context.Background()
	var counted int
	var mu sync.Mutex
	w := retry.Local(mutex.New(), func(n int) { mu.Lock(); counted = n; mu.Unlock() })
	held, err := w.Acquire(ctx, "holder")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		l, err := w.Acquire(ctx, "waiter")
		if err == nil {
			err = l.Release(ctx)
		}
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("the waiter got a held lock (err %v)", err)
	case <-time.After(20 * time.Millisecond):
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if counted != 2 {
		t.Fatalf("the waiter made %d attempts, want 2: one before the release, one after", counted)
	}
}
