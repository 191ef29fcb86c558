package retry_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/locks/retry"
)

func TestUntil(t *testing.T) {
	boom := errors.New("boom")
	for name, tc := range map[string]struct {
		results []error // per attempt: nil = obtained, errTaken = taken, other = failure
		ctx     func() (context.Context, context.CancelFunc)
		want    error
		tries   int
	}{
		"obtained at once":   {results: []error{nil}, tries: 1},
		"obtained after two": {results: []error{errTaken, errTaken, nil}, tries: 3},
		"failure ends it":    {results: []error{errTaken, boom}, want: boom, tries: 2},
		"deadline": {results: []error{errTaken}, want: context.DeadlineExceeded,
			ctx: func() (context.Context, context.CancelFunc) {
				return context.WithTimeout(context.Background(), 10*time.Millisecond)
			}},
		"caller gone": {results: []error{errTaken}, want: context.Canceled,
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
			var tries int
			err := retry.Until(ctx, time.Millisecond, func(ctx context.Context) (bool, error) {
				if ctx.Err() != nil {
					t.Error("an attempt ran with a cancelled context: its outcome would be unknown")
				}
				r := tc.results[min(tries, len(tc.results)-1)]
				tries++
				if errors.Is(r, errTaken) {
					return false, nil
				}
				return r == nil, r
			})
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if tc.tries > 0 && tries != tc.tries {
				t.Fatalf("%d attempts, want %d", tries, tc.tries)
			}
		})
	}
}

var errTaken = errors.New("taken")
