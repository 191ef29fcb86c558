package scenario

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/locklab/locklab/internal/reason"
)

// clockJump (seed 003's "C"): a Redis node's wall clock jumps forward by 2 x
// TTL while the holder S, on replica 1, works inside its lease (0.9 x TTL).
// The node computes every expiry from its wall clock, so S's key there is
// expired at once; sale B, on replica 2, comes in once it is gone.
//
// On one node (v6, v8) that node is the lock's: B takes the lock and sells
// while S still works. v6 never learns it, and writes what it read: oversell.
// v8's watchdog finds its key gone at its next renewal (every TTL/3) and
// raises the lost signal: S stops before its write.
//
// Redlock across three nodes: S took the lock while its way to the third
// node was down (its proxy disabled, so that attempt is refused at once): S
// holds exactly a majority, the stock's node and the second. The second
// node's clock jumps; B finds two free nodes of three, the second and the
// third, a majority: two holders, and S, within its lease, writes: oversell
// (Kleppmann's case; Redis' documentation assumes clocks that do not jump).
//
// Fenced, the stock refuses S's stale write. Afterwards the clock goes back
// to the real time (as NTP would step it back).
func clockJump(fenced bool) runFunc {
	return func(ctx context.Context, e Env, lock string, before int64) (observed, detail string, err error) {
		fence := fenceHook(fenced)
		node := e.StockNode
		gone := func() (bool, error) {
			locked, err := e.locked(ctx)
			return !locked, err
		}
		if lock == "redlock" {
			if len(e.SpareNodes) < 2 {
				return "", "", errors.New("clock-jump needs three Redis nodes for redlock")
			}
			reconnect, err := e.disconnect(e.Replicas[0].Name, e.SpareNodes[1])
			if err != nil {
				return "", "", err
			}
			defer func() { err = errors.Join(err, reconnect()) }()
			node = e.SpareNodes[0]
			gone = func() (bool, error) {
				n, err := e.SpareRedis[0].Exists(ctx, e.LockKey).Result()
				return n == 0, err
			}
		}
		s, err := e.heldAndRead(ctx, lock, "hold="+(e.TTL*9/10).String()+"&"+fence)
		if err != nil {
			return "", "", err
		}
		took := time.Now()
		jump := 2 * e.TTL
		if err := e.Procs.JumpClock(node, jump); err != nil {
			<-s
			return "", "", err
		}
		e.mark(reason.New("clockJumps", "{node}'s clock jumps {ms} ms ahead", "node", node, "ms", jump.Milliseconds()))
		defer func() {
			err = errors.Join(err, notUndone(node, LeftClockAhead, e.Procs.JumpClock(node, 0)))
			e.mark(reason.New("clockBackReal", "{node}'s clock back to the real time", "node", node))
		}()
		if err := e.waitUntil(ctx, e.TTL/2, gone); err != nil {
			<-s
			return "", "", fmt.Errorf("the first sale's key on %s outlived the jump: %w", node, err)
		}
		rb := <-e.sellAt(ctx, e.Replicas[1].URL, lock, fence)
		sent := time.Since(took)
		observed, detail, err = e.staleHolder(ctx, before, <-s, rb)
		return observed, detail + fmt.Sprintf(", the second sale answered %s after the first had read", sent.Round(time.Millisecond)), err
	}
}

// disconnect refuses every connection from replica to node (its proxy
// disabled: connecting fails at once, as to a node that is down for it
// alone) until reconnect, which runs once however often it is called.
func (e Env) disconnect(replica, node string) (reconnect func() error, err error) {
	p, err := e.faultProxy(replica, node)
	if err != nil {
		return nil, err
	}
	if err := p.Disable(); err != nil {
		return nil, fmt.Errorf("scenario: disable %s: %w", p.Name, err)
	}
	e.mark(reason.New("cannotReach", "{replica} cannot reach {node}", "replica", replica, "node", node))
	return sync.OnceValue(func() error {
		err := p.Enable()
		e.mark(reason.New("reachesAgain", "{replica} reaches {node} again", "replica", replica, "node", node))
		if err != nil {
			return notUndone(p.Name, LeftDisconnected, fmt.Errorf("scenario: enable %s: %w", p.Name, err))
		}
		return nil
	}), nil
}
