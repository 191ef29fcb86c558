package step_test

import (
	"context"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/builder"
	"github.com/locklab/locklab/internal/redistest"
	"github.com/locklab/locklab/internal/sale"
	"github.com/locklab/locklab/internal/step"
	"github.com/locklab/locklab/internal/versions"
	"github.com/redis/go-redis/v9"
)

// BenchmarkSale is one v6 sale on a real Redis through a client without the
// gate, and through one with the gate present but the sale unarmed: the
// difference must be within noise (issue 45).
func BenchmarkSale(b *testing.B) {
	for _, gated := range []bool{false, true} {
		name := "no-gate"
		if gated {
			name = "gate-unarmed"
		}
		b.Run(name, func(b *testing.B) {
			srv := redistest.Start(b)
			rdb := srv.Client()
			if gated {
				rdb.AddHook(step.Hook{})
			}
			svc := sale.New(rdb, sale.Options{Key: "inventory:bench"})
			m := builder.Build(builder.Deps{Redis: rdb, LockKey: "lock:bench", TTL: 10 * time.Second}, versions.Variant{Wait: "poll"})["v6"]
			ctx := context.Background()
			// b.Loop sets b.N only as it runs: a stock no run exhausts.
			if err := svc.SetStock(ctx, 1<<40); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if _, err := svc.Sell(ctx, m); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkHookUnarmed is the gate's own cost per command for an unarmed
// request, without I/O: the context lookup in a request-sized context.
func BenchmarkHookUnarmed(b *testing.B) {
	ctx := context.Background()
	for range 8 { // a request's context carries a few values (router, request id, faults)
		ctx = context.WithValue(ctx, new(int), 1)
	}
	cmd := redis.NewStringCmd(ctx, "get", "inventory:001")
	next := func(context.Context, redis.Cmder) error { return nil }
	for _, gated := range []bool{false, true} {
		name, process := "no-gate", redis.ProcessHook(next)
		if gated {
			name, process = "gate-unarmed", step.Hook{}.ProcessHook(next)
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				_ = process(ctx, cmd)
			}
		})
	}
}
