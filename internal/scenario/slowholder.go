package scenario

import (
	"context"
	"fmt"
	"time"

	"github.com/locklab/locklab/internal/api"
	"github.com/locklab/locklab/internal/reason"
)

// slowHolder: S sells with hold 1.5 x TTL. Once S holds the lock, B comes in
// with hold 1 x TTL. Where the lease can expire under S (v4 to v7), B gets the
// lock at about TTL, reads the stock before S writes it, and holds the lock
// when S releases at 1.5 x TTL: S's blind DEL (v4) removes B's lock, an owner
// check (v5 on) leaves it; both sell the same unit. Under v8 the watchdog
// keeps S's lease, B waits, and the sales run one after the other. With
// fencing (slow-holder+fence) the stale holder writes first, after B has
// read: the stock refuses S (412) and only B sells.
func slowHolder(fenced bool) runFunc {
	return func(ctx context.Context, e Env, lock string, before int64) (string, string, error) {
		return slowHeld(ctx, e, lock, before, fenced)
	}
}

func slowHeld(ctx context.Context, e Env, lock string, before int64, fenced bool) (string, string, error) {
	fence := "&" + fenceHook(fenced)
	s := e.sell(ctx, lock, "hold="+(e.TTL*3/2).String()+fence)
	if err := e.waitLock(ctx, true, 5*time.Second); err != nil {
		// The lock was free (reset freed it, and no other sale was sent).
		if losesWakeups(lock) && stranded(lock, <-s) {
			return "", "", fmt.Errorf("the slow sale %w", errStranded)
		}
		return "", "", fmt.Errorf("the slow sale never took the lock: %w", err)
	}
	b := e.sell(ctx, lock, "hold="+e.TTL.String()+fence)
	rs, held, rb, err := e.lockAfterFirst(ctx, s, b)
	if err != nil {
		return "", "", err
	}
	oversold, detail, err := e.oversold(ctx, before, rs, rb)
	if err != nil {
		return "", "", err
	}
	return slowVerdict(oversold, held, rs, rb, e.TTL), detail, nil
}

// slowVerdict judges slow-holder from the first sale's reply rs, the second's
// rb, the units oversold and whether a lock was held when the first sale
// answered. Its precondition is that B waited past A's lease (the lease was
// at most ttl, and B was sent once A held the lock), or sold: a B that gave
// up sooner could never have overlapped A, and "no oversell" would say
// nothing about the lock.
func slowVerdict(oversold, held int64, rs, rb reply, ttl time.Duration) string {
	switch {
	case oversold == 0 && rb.outcome != api.Sold && rb.elapsed < ttl:
		return notTested(reason.New("gaveUpEarly", "B answered {reply} after {after}, before A's {ttl} lease ran out: raise INVENTORY_ACQUIRE_TIMEOUT above INVENTORY_TTL",
			"reply", rb, "after", rb.elapsed.Round(time.Millisecond), "ttl", ttl))
	case oversold == 0 && rs.code == api.CodeFenced:
		return StaleRefused
	case oversold == 0:
		return NoOversell
	case held == 0:
		return ForeignDelete
	default:
		return NoForeignDelete
	}
}
