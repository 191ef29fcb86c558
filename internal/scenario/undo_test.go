package scenario

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
)

// What a scenario could not undo comes out of every way its errors are
// joined and wrapped, once per node and state, and nothing else does.
func TestNotUndoneIn(t *testing.T) {
	thaw := sync.OnceValue(func() error {
		return notUndone("inventory-1", LeftFrozen, errors.New("cluster: inventory-1 is not running"))
	})
	restart := restarted("redis-6381", func(context.Context) error { return errors.New("did not answer") })
	healed := notUndone("inventory-1>redis-6381", LeftCutOff, nil)
	if healed != nil {
		t.Fatalf("an undo that worked is %v, want nil", healed)
	}
	err := errors.Join(fmt.Errorf("the sale: %w", errors.New("EOF")), thaw())
	err = also(err, thaw()) // the deferred call sees the same error again
	err = fmt.Errorf("pause-holder: %w", errors.Join(err, restart(context.Background()), healed))
	if n := strings.Count(err.Error(), "is not running"); n != 1 {
		t.Errorf("the error says the failed thaw %d times, want once: %v", n, err)
	}
	got := NotUndoneIn(err)
	if len(got) != 2 || got[0].Node != "inventory-1" || got[0].Left != LeftFrozen || got[1].Node != "redis-6381" || got[1].Left != LeftDown {
		t.Fatalf("NotUndoneIn = %v, want inventory-1 frozen, then redis-6381 down", got)
	}
	if !strings.Contains(got[1].Error(), "redis-6381 left down: did not answer") {
		t.Errorf("the error reads %q", got[1].Error())
	}
	if got := NotUndoneIn(errors.Join(errors.New("x"), context.Canceled)); got != nil {
		t.Errorf("errors with nothing left in place give %v", got)
	}
}
