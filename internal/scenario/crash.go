package scenario

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/locklab/locklab/internal/api"
)

// crashHolder: S, on replica 1, takes the lock and works for 2 x TTL; once
// it holds the lock the replica is killed (a longer hold would change
// nothing, and on Compose's 2 s lease it would pass the hooks' 5 s cap). B, on replica 2, then wants the lock: with no expiry
// (v3) nobody will ever release it and B waits until its deadline; with one,
// B gets it once the lease runs out and sells. Replica 1 is started again.
func crashHolder(ctx context.Context, e Env, lock string, before int64) (observed, detail string, err error) {
	s := e.sellAt(ctx, e.Replicas[0].URL, lock, "hold="+(2*e.TTL).String())
	if err := e.waitLock(ctx, true, 5*time.Second); err != nil {
		return "", "", fmt.Errorf("the first sale never took the lock: %w", err)
	}
	restart, err := e.kill(e.Replicas[0].Name)
	if err != nil {
		return "", "", err
	}
	defer func() { err = errors.Join(err, restart(ctx)) }() // whatever happens, the replica comes back
	<-s                                                     // its connection died with the replica
	rb := <-e.sellAt(ctx, e.Replicas[1].URL, lock, "")
	if rb.err != nil {
		return "", "", rb.err
	}
	oversold, detail, err := e.oversold(ctx, before, rb)
	detail += fmt.Sprintf(", the next sale answered in %s", rb.elapsed.Round(time.Millisecond))
	switch {
	case err != nil:
		return "", "", err
	case rb.code == api.CodeLockTimeout:
		return Deadlock, detail, nil
	case rb.status == http.StatusOK && oversold == 0 && noLease(lock) && rb.elapsed < e.TTL/2:
		return ResumesAtOnce, detail, nil // its hold ended with the holder's connection
	case rb.status == http.StatusOK && oversold == 0:
		return Resumes, detail, nil
	}
	return "unexpected reply", detail, nil
}
