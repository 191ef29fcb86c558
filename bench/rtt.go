package main

import (
	"context"
	"slices"
	"time"
)

// rttEvery is how often the round-trip probe pings Redis during a run
// through nginx: about 330 PINGs a second beside the run's 10,000-25,000
// commands, so that it measures the round trip the sales meet without
// adding to it.
const rttEvery = 3 * time.Millisecond

// probeRoundTrips pings the locks' Redis (the stock's node) every rttEvery
// from one goroutine of the bench, until the returned stop is called; stop
// returns the median round trip in µs (0: none measured). Measured during
// the run, it is the round trip the run's hand-overs met, on the same
// machine in the same seconds: what a hand-over of one round trip would
// take.
func (b *bench) probeRoundTrips(ctx context.Context) (stop func() float64) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan []float64, 1)
	go func() {
		var us []float64
		t := time.NewTicker(rttEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				done <- us
				return
			case <-t.C:
				start := time.Now()
				if err := b.rdb.Ping(ctx).Err(); err == nil {
					us = append(us, float64(time.Since(start).Nanoseconds())/1e3)
				}
			}
		}
	}()
	return func() float64 {
		cancel()
		us := <-done
		if len(us) == 0 {
			return 0
		}
		return median(slices.Clone(us))
	}
}
