package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	lua "github.com/locklab/locklab/internal/locks/v6_lua"

	"github.com/locklab/locklab/internal/sale"
	"github.com/redis/go-redis/v9"
)

// ceilings takes bracket slices of the serial ceiling and of row i's own,
// taking turns, appends them to serial and own, and returns this set's own
// slices.
func (b *bench) ceilings(ctx context.Context, i int, own, serial *[]float64) ([]float64, error) {
	slice := b.o.ceilingTime / (2 * bracket)
	var set []float64
	for range bracket {
		s, err := serialCeiling(ctx, b.rdb, slice)
		if err != nil {
			return nil, fmt.Errorf("serial ceiling: %w", err)
		}
		c, err := b.sellers[i]()
		if err != nil {
			return nil, fmt.Errorf("%s %s ceiling: %w", b.rep.Rows[i].Lock, b.rep.Rows[i].Wait, err)
		}
		*serial, *own, set = append(*serial, s), append(*own, c), append(set, c)
	}
	return set, nil
}

// serialCeiling runs the four commands of a locked sale back to back from
// one goroutine for d: SET NX PX (v6's acquire), GET, SET, and v6's Lua
// compare-and-delete release.
func serialCeiling(ctx context.Context, rdb *redis.Client, d time.Duration) (float64, error) {
	lock := lua.New(rdb, lua.Options{Key: "bench:lock"})
	return loop(ctx, d, func() error {
		l, err := lock.TryAcquire(ctx, "bench")
		if err != nil {
			return err
		}
		v, err := rdb.Get(ctx, "bench:stock").Int64()
		if err != nil {
			return err
		}
		if err := rdb.Set(ctx, "bench:stock", v-1, 0).Err(); err != nil {
			return err
		}
		return l.Release(ctx)
	})
}

// ownCeiling runs m's whole sale (acquire, GET, SET, release) serially for d.
func ownCeiling(ctx context.Context, svc *sale.Service, m sale.Method, d time.Duration) (float64, error) {
	return loop(ctx, d, func() error {
		res, err := svc.Sell(ctx, m)
		if err != nil {
			return err
		}
		return res.ReleaseErr
	})
}

// commands is how many commands the nodes have run since they started: the
// calls of every command in INFO commandstats, but INFO's own (the bench's
// reading would count itself).
func commands(ctx context.Context, nodes []redis.UniversalClient) (int64, error) {
	var total int64
	for _, n := range nodes {
		info, err := n.Info(ctx, "commandstats").Result()
		if err != nil {
			return 0, fmt.Errorf("INFO commandstats: %w", err)
		}
		total += commandCalls(info)
	}
	return total, nil
}

// commandCalls sums the calls= of every cmdstat_ line of an INFO
// commandstats reply, less cmdstat_info's.
func commandCalls(info string) int64 {
	var total int64
	for line := range strings.SplitSeq(info, "\n") {
		name, stats, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") || name == "cmdstat_info" {
			continue
		}
		calls, _, _ := strings.Cut(strings.TrimPrefix(stats, "calls="), ",")
		n, err := strconv.ParseInt(calls, 10, 64)
		if err == nil {
			total += n
		}
	}
	return total
}

// median of xs (sorted in place).
func median(xs []float64) float64 {
	slices.Sort(xs)
	return xs[len(xs)/2]
}

// loop calls f until d has passed and returns the calls completed per second.
func loop(ctx context.Context, d time.Duration, f func() error) (float64, error) {
	start := time.Now()
	n := 0
	for end := start.Add(d); time.Now().Before(end); n++ {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		if err := f(); err != nil {
			return 0, err
		}
	}
	return float64(n) / time.Since(start).Seconds(), nil
}
