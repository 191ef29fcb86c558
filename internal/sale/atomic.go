package sale

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/locklab/locklab/internal/step"
	"github.com/redis/go-redis/v9"
)

//go:embed decrement.lua
var decrementSrc string

var decrementScript = redis.NewScript(decrementSrc)

// Script returns the sale's own Lua script of that file name ("" when there
// is none), as it runs: the lab shows it beside its lesson.
func Script(name string) string {
	return map[string]string{"decrement.lua": decrementSrc, "fenced.lua": fencedSrc}[name]
}

func (s *Service) sellAtomic(ctx context.Context, tr *Trace) (Result, error) {
	step.Phase(ctx, step.Stock)
	n, err := decrementScript.Run(ctx, s.rdb, []string{s.key}).Int64()
	if err == nil && n >= 0 { // read and written in one step
		now := time.Now()
		tr.Read, tr.Written = Step{At: now, Value: n + 1}, Step{At: now, Value: n}
	}
	switch {
	case err != nil:
		return Result{}, writeError("sale: atomic decrement", err)
	case n == -3:
		return Result{}, fmt.Errorf("%w: %s", ErrStockCorrupt, s.key)
	case n == -2:
		return Result{}, fmt.Errorf("%w: %s", ErrStockMissing, s.key)
	case n == -1:
		return Result{}, ErrSoldOut
	}
	if err := s.replicated(ctx); err != nil {
		return Result{}, err
	}
	return Result{Remaining: n}, nil
}
