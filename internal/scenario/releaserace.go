package scenario

import (
	"context"
	"fmt"
	"time"
)

// releaseRace: S sells with release_pause 1.5 x TTL: its lease expires during
// the pause. B then takes the lock (hold 1 x TTL) and holds it when S's pause
// ends. v5 already read its own value before the pause, so its DEL removes
// B's lock; v6 compares and deletes in one step and leaves it.
func releaseRace(ctx context.Context, e Env, lock string, _ int64) (string, string, error) {
	s := e.sell(ctx, lock, "release_pause="+(e.TTL*3/2).String())
	if err := e.waitLock(ctx, true, 5*time.Second); err != nil {
		return "", "", fmt.Errorf("the first sale never took the lock: %w", err)
	}
	if err := e.waitLock(ctx, false, 3*e.TTL); err != nil {
		return "", "", fmt.Errorf("the first sale's lease never expired during its release pause: %w", err)
	}
	b := e.sell(ctx, lock, "hold="+e.TTL.String())
	if err := e.waitLock(ctx, true, e.TTL/2); err != nil {
		return "", "", fmt.Errorf("the successor did not take the lock within half a lease: %w", err)
	}
	rs, held, rb, err := e.lockAfterFirst(ctx, s, b)
	if err != nil {
		return "", "", err
	}
	detail := fmt.Sprintf("first sale %d %s; successor %d", rs.status, rs.warning, rb.status)
	if held == 0 {
		return DeletesSuccessor, detail, nil
	}
	return KeepsSuccessor, detail, nil
}
