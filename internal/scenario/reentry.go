package scenario

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/locklab/locklab/internal/api"
)

// reentry: one sale that takes the lock twice, nested. A lock that is not
// reentrant makes the inner acquisition wait on the outer one, which only its
// own release could end: so it waits until its acquire deadline (a 503) or, if
// the lease is the shorter, until its own lease expires, and then sells with
// the outer hold lost (a 200 with the service's lease warning).
func reentry(ctx context.Context, e Env, lock string, _ int64) (string, string, error) {
	r := <-e.sell(ctx, lock, "nested=1")
	if r.err != nil {
		return "", "", r.err
	}
	switch {
	case r.code == api.CodeLockTimeout:
		return WaitsOnItself, fmt.Sprintf("503 lock_timeout after %s", r.elapsed.Round(time.Millisecond)), nil
	case r.status == http.StatusOK && r.warning != "" && r.elapsed >= e.TTL:
		return WaitsOnItself, fmt.Sprintf("waited %s for its own lease (%s) to expire, then sold with the lock lost",
			r.elapsed.Round(time.Millisecond), e.TTL), nil
	case r.status == http.StatusOK && r.warning == "":
		return Passes, fmt.Sprintf("200 in %s", r.elapsed.Round(time.Millisecond)), nil
	}
	return "unexpected reply", fmt.Sprintf("%d %s %s", r.status, r.code, r.warning), nil
}
