package scenario

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Outcomes of the Redlock restart scenarios, read from the history.
const (
	TwoHolders   = "two holders"
	NoTwoHolders = "no two holders"
)

// byHistory is a run's observation when the history decides it: Run sets
// TwoHolders or NoTwoHolders from the checker's verdict.
const byHistory = "(by history)"

// restartFix is how a Redlock node that restarts is kept from forgetting a
// lock it granted (Redis' own documentation names both).
type restartFix int

const (
	noFix        restartFix = iota
	delayRestart            // the node stays down for longer than the lease
	fsyncAlways             // the node persists every write (appendfsync always)
)

// redlockRestart: holder A, on replica 1, takes the lock while one node (C)
// is down, so it holds exactly a majority, the other two (the stock's node
// and B). B crashes and restarts without persistence, forgetting A's key,
// as C comes back, empty. Sale S, on replica 2, now finds two free
// nodes of three, B and C, a majority: two holders, while A still holds its
// lease (Kleppmann's case against Redlock; Redis' documentation agrees). A
// works for 0.9 x TTL, so it ends within its lease: any overlap is the
// restart's doing, not an expired lease's.
//
// The fixes: B stays down for 1.5 x TTL before it restarts (delayRestart):
// S cannot reach a majority until A's key is gone from the stock's node, and
// by then A has released. Or B persists every write before it answers
// (fsyncAlways: appendonly, appendfsync always) and comes back with A's key.
func redlockRestart(fix restartFix) runFunc {
	return func(ctx context.Context, e Env, lock string, before int64) (observed, detail string, err error) {
		if len(e.SpareNodes) < 2 {
			return "", "", errors.New("redlock-restart needs three Redis nodes")
		}
		b, c, bRedis := e.SpareNodes[0], e.SpareNodes[1], e.SpareRedis[0]
		restartArgs := []string(nil)
		if fix == fsyncAlways {
			restartArgs, err = e.persistEveryWrite(ctx, bRedis, b)
			if err != nil {
				return "", "", err
			}
			e.mark(b + " persists every write (appendfsync always)")
		}
		restartC, err := e.kill(c)
		if err != nil {
			return "", "", err
		}
		// A has read the stock: its acquisition is over, not only its SETs
		// sent (killing B while A still waits for B's reply would leave A
		// with one node of three, and no lock).
		a, werr := e.heldAndRead(ctx, lock, "hold="+(e.TTL*9/10).String())
		if werr != nil {
			return "", "", errors.Join(fmt.Errorf("the first sale never held the lock: %w", werr), restartC(ctx))
		}
		took := time.Now()
		werr = e.waitUntil(ctx, e.TTL/2, func() (bool, error) { // A holds the stock's node and B
			n1, err1 := e.Redis.Exists(ctx, e.LockKey).Result()
			n2, err2 := bRedis.Exists(ctx, e.LockKey).Result()
			return n1 == 1 && n2 == 1, errors.Join(err1, err2)
		})
		var restartB func(context.Context) error
		if werr == nil {
			restartB, werr = e.Procs.KillWith(b, restartArgs...)
		}
		if werr != nil {
			<-a
			return "", "", errors.Join(fmt.Errorf("the first sale never held two of three nodes: %w", werr), restartC(ctx))
		}
		e.mark(b + " killed")
		// C and B come back at once: the whole sequence fits in A's hold
		// (0.9 x TTL; the detail says when the second sale went), also
		// where a restart takes half a second (a container).
		cBack := make(chan error, 1)
		go func() { cBack <- restartC(ctx) }()
		var s <-chan reply
		switch fix {
		case delayRestart:
			// The second sale comes in while B is down; B comes back once the
			// lease has passed (the fix is that delay, not a wait for state).
			err = <-cBack
			s = e.sellAt(ctx, e.Replicas[1].URL, lock, "")
			select {
			case <-ctx.Done():
			case <-time.After(e.TTL * 3 / 2):
			}
			err = errors.Join(err, restartB(ctx))
			e.mark(b + " restarted after 1.5 x TTL")
		default:
			err = errors.Join(restartB(ctx), <-cBack)
			e.mark(b + " and " + c + " restarted")
			s = e.sellAt(ctx, e.Replicas[1].URL, lock, "")
		}
		sent := time.Since(took)
		ra, rs := <-a, <-s
		if err := errors.Join(err, ra.err, rs.err); err != nil {
			return "", "", err
		}
		_, detail, err = e.oversold(ctx, before, ra, rs)
		detail += fmt.Sprintf(", the second sale sent %s after the first, answered in %s", sent.Round(time.Millisecond),
			rs.elapsed.Round(time.Millisecond))
		if ra.warning != "" {
			detail += ", the first sale: " + strings.ReplaceAll(ra.warning, "\n", "; ")
		}
		return byHistory, detail, err
	}
}

// persistEveryWrite switches the node's persistence on at run time
// (appendonly yes, appendfsync always: the AOF goes to the node's directory,
// the cluster's run directory, where only this node ever writes one), waits
// until its first rewrite is done, and returns the arguments that make it
// load that file when it is started again.
func (e Env) persistEveryWrite(ctx context.Context, node *redis.Client, name string) ([]string, error) {
	for _, kv := range [][2]string{{"appendfsync", "always"}, {"appendonly", "yes"}} {
		if err := node.ConfigSet(ctx, kv[0], kv[1]).Err(); err != nil {
			return nil, fmt.Errorf("scenario: %s: CONFIG SET %s %s: %w", name, kv[0], kv[1], err)
		}
	}
	err := e.waitUntil(ctx, 10*time.Second, func() (bool, error) {
		info, err := node.Info(ctx, "persistence").Result()
		return infoField(info, "aof_enabled") == "1" && infoField(info, "aof_rewrite_in_progress") == "0" &&
			infoField(info, "aof_rewrite_scheduled") == "0", err
	})
	if err != nil {
		return nil, fmt.Errorf("scenario: %s never finished its first AOF rewrite: %w", name, err)
	}
	return []string{"--appendonly", "yes", "--appendfsync", "always"}, nil
}

// historyOutcome is a byHistory run's observation: whether the checker found
// two holders among the cell's sales.
func historyOutcome(twoHolders int) string {
	if twoHolders > 0 {
		return TwoHolders
	}
	return NoTwoHolders
}
