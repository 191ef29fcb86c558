package redlock

import (
	"context"
	"testing"

	"github.com/locklab/locklab/internal/redistest"
)

// The write-back raises a counter that is behind (or unset) to the token and
// leaves one that is ahead (another holder's INCR, racing) as it is.
func TestRaiseNeverLowers(t *testing.T) {
	rdb := redistest.Start(t).Client()
	ctx := context.Background()
	for _, c := range []struct{ token, want int64 }{{5, 5}, {3, 5}, {5, 5}, {9, 9}} {
		got, err := raiseScript.Run(ctx, rdb, []string{"counter"}, c.token).Int64()
		if err != nil {
			t.Fatal(err)
		}
		stored, err := rdb.Get(ctx, "counter").Int64()
		if err != nil || got != c.want || stored != c.want {
			t.Fatalf("raise to %d: returned %d, stored %d (err %v); want %d", c.token, got, stored, err, c.want)
		}
	}
}
