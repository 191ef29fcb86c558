// Package steptest drives stepped sales in the gates' tests (Redis, etcd,
// SQL, ZooKeeper): a sale that takes a lock and releases it, stopped before
// its first step, and the waits for where it stops next.
package steptest

import (
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/lease"
	"github.com/locklab/locklab/internal/step"
)

// Held is what a Hold's sale returns: its acquisition's error, or else its
// release's, and whether its lease was already lost, by the clock too, when
// it was granted (a lease counted from the wrong moment).
type Held struct {
	Acquire, Release error
	LostAtGrant      bool
}

// Hold starts the stepped sale id on g: it takes a lock with acquire (the
// owner is id) and releases it. It returns once the sale is stopped before
// its first step.
func Hold(t testing.TB, g *step.Gate, id string, acquire func(ctx context.Context, owner string) (lease.Lease, error)) *step.Sale {
	t.Helper()
	s, err := g.Start(context.Background(), id, func(ctx context.Context) any {
		step.Phase(ctx, step.Acquire)
		ls, err := acquire(ctx, id)
		if err != nil {
			return Held{Acquire: err}
		}
		lost := lease.IsLost(ls)
		step.Phase(ctx, step.Release)
		return Held{Release: ls.Release(ctx), LostAtGrant: lost}
	})
	if err != nil {
		t.Fatal(err)
	}
	Settle(t, s, "stopped")
	return s
}

// Settle waits, 10 s at most, until s is stopped at a step or done, and
// fails unless its state is then want.
func Settle(t testing.TB, s *step.Sale, want string) step.State {
	t.Helper()
	st := s.Settle(context.Background(), 10*time.Second)
	if st.State != want {
		t.Fatalf("%s is %s, want %s: %+v", st.ID, st.State, want, st)
	}
	return st
}

// Next lets s take the step it is stopped before and settles it.
func Next(t testing.TB, s *step.Sale, want string) step.State {
	t.Helper()
	if err := s.Next(); err != nil {
		t.Fatal(err)
	}
	return Settle(t, s, want)
}

// Match fails unless got, a step's command or reply (what names it), is
// all of pattern, and returns its submatches.
func Match(t testing.TB, what, got, pattern string) []string {
	t.Helper()
	m := regexp.MustCompile("^" + pattern + "$").FindStringSubmatch(got)
	if m == nil {
		t.Fatalf("%s is %q, want it to match %q", what, got, pattern)
	}
	return m
}
