package scenario

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locklab/locklab/internal/reason"
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
// lease (Kleppmann's case against Redlock; Redis' documentation agrees).
//
// Nothing in it guesses how long a restart takes (milliseconds for a
// process, seconds for a container on a busy machine): the cell first times
// one restart of C, and gives A a lease of TTL + 4 x that restart (the
// lease= hook). A stops itself right before its write (stop_before_write),
// holding the lock, until S has answered or, where a fix is to keep S out,
// until S has been refused twice; only then does A resume, write and
// release. A's key must still be alive on the stock's node when A resumes:
// any overlap is then the restart's doing, not an expired lease's, and if
// the lease did run out first the cell is "not tested" and says why.
//
// The fixes: B stays down until A's lease is over (delayRestart: S cannot
// reach a majority while A's key lives on the stock's node and B is down,
// and B comes back once A has released). Or B persists every write before
// it answers (fsyncAlways: appendonly, appendfsync always) and comes back
// with A's key.
func redlockRestart(fix restartFix) runFunc {
	return func(ctx context.Context, e Env, lock string, before int64) (observed, detail string, err error) {
		if len(e.SpareNodes) < 2 {
			return "", "", errors.New("redlock-restart needs three Redis nodes")
		}
		b, c, bRedis, cRedis := e.SpareNodes[0], e.SpareNodes[1], e.SpareRedis[0], e.SpareRedis[1]
		restartArgs := []string(nil)
		if fix == fsyncAlways {
			restartArgs, err = e.persistEveryWrite(ctx, bRedis, b)
			if err != nil {
				return "", "", err
			}
			e.mark(reason.New("fsyncAlways", "{node} persists every write (appendfsync always)", "node", b))
		}
		// This machine's restart, measured: kill C, start it, until it answers.
		restartC, err := e.kill(c)
		if err != nil {
			return "", "", err
		}
		measured, err := timed(ctx, restartC)
		if err != nil {
			return "", "", err
		}
		e.mark(reason.New("restartedIn", "{node} restarted in {took} (timed)", "node", c, "took", measured.Round(time.Millisecond)))
		aLease := (e.TTL + 4*measured).Round(time.Millisecond)
		if restartC, err = e.kill(c); err != nil {
			return "", "", err
		}
		upC := once(restartC)
		defer func() { err = errors.Join(err, upC(ctx)) }() // whatever happens, the nodes come back

		a := e.sellAt(ctx, e.Replicas[0].URL, lock, "lease="+aLease.String()+"&stop_before_write=1")
		thaw := e.thaw(e.Replicas[0].Name) // it stops itself
		defer func() { err = also(err, thaw()) }()
		if werr := e.waitUntil(ctx, 10*time.Second, func() (bool, error) { return e.Procs.Stopped(e.Replicas[0].Name) }); werr != nil {
			return "", "", fmt.Errorf("the first sale never stopped before its write, holding the lock: %w", werr)
		}
		e.mark(reason.New("stoppedHoldingLease", "{node} stopped before its write, holding the lock (lease {lease})", "node", e.Replicas[0].Name, "lease", aLease))
		n1, err1 := e.Redis.Exists(ctx, e.LockKey).Result()
		n2, err2 := bRedis.Exists(ctx, e.LockKey).Result()
		if err := errors.Join(err1, err2); err != nil {
			return "", "", err
		}
		if n1 != 1 || n2 != 1 {
			return "", "", fmt.Errorf("the first sale holds the lock but not on the stock's node and %s (%d, %d)", b, n1, n2)
		}
		restartB, err := e.Procs.KillWith(b, restartArgs...)
		if err != nil {
			return "", "", err
		}
		e.mark(reason.New("killed", "{node} killed", "node", b))
		upB := once(restarted(b, restartB))
		defer func() { err = errors.Join(err, upB(ctx)) }()
		var took string
		switch fix {
		case delayRestart: // B stays down; C comes back
			d, err := timed(ctx, upC)
			if err != nil {
				return "", "", err
			}
			e.mark(reason.New("restarted", "{node} restarted", "node", c))
			took = fmt.Sprintf("%s restarted in %s, %s still down", c, d.Round(time.Millisecond), b)
		default:
			dC := make(chan error, 1)
			var tC time.Duration
			go func() {
				var err error
				tC, err = timed(ctx, upC)
				dC <- err
			}()
			tB, err := timed(ctx, upB)
			if err := errors.Join(err, <-dC); err != nil {
				return "", "", err
			}
			e.mark(reason.New("bothRestarted", "{a} and {b} restarted", "a", b, "b", c))
			took = fmt.Sprintf("%s and %s restarted in %s and %s", b, c, tB.Round(time.Millisecond), tC.Round(time.Millisecond))
		}
		// C came back empty: every SET it has served since is one of S's
		// attempts (A never held C, and replica 1 is stopped).
		s := e.sellAt(ctx, e.Replicas[1].URL, lock, "")
		var rs reply
		answered := false
		if werr := e.waitUntil(ctx, time.Minute, func() (bool, error) {
			select {
			case rs = <-s:
				answered = true
				return true, nil
			default:
			}
			if fix == noFix { // S gets its whole acquire deadline
				return false, nil
			}
			sets, err := calls(ctx, cRedis, "set")
			return sets >= 3, err // refused twice, trying a third time
		}); werr != nil {
			return "", "", fmt.Errorf("the second sale neither answered nor tried three times: %w", werr)
		}
		left, err := e.Redis.PTTL(ctx, e.LockKey).Result()
		if err != nil {
			return "", "", err
		}
		e.mark(reason.New("resumed", "{node} resumed", "node", e.Replicas[0].Name))
		if err := thaw(); err != nil {
			return "", "", err
		}
		ra := <-a
		if !answered {
			rs = <-s
		}
		if fix == delayRestart { // A's lease is over: it released, or S could not have sold
			if err := upB(ctx); err != nil {
				return "", "", err
			}
			e.mark(reason.New("restartedLeaseOver", "{node} restarted, the first sale's lease over", "node", b))
		}
		if err := errors.Join(ra.err, rs.err); err != nil {
			return "", "", err
		}
		_, detail, err = e.oversold(ctx, before, ra, rs)
		detail += fmt.Sprintf(", %s's restart timed at %s, so the first sale's lease was %s; %s; the second sale answered in %s",
			c, measured.Round(time.Millisecond), aLease, took, rs.elapsed.Round(time.Millisecond))
		if left <= 0 {
			// The overlap, if any, would be an expired lease's: this cell
			// shows nothing about restarts then.
			return notTested(reason.New("leaseRanOutFirst", "the first sale's lease ran out before it resumed: any overlap would be the expired lease's, not the restart's")), detail + ", the first sale's key gone from the stock's node before it resumed", err
		}
		// A's release, which finds its key on the stock's node only, is in
		// the history (Run adds every failed release to the detail).
		return byHistory, detail + fmt.Sprintf(", %s of the first sale's lease left when it resumed", left.Round(time.Millisecond)), err
	}
}

// timed runs f and says how long it took.
func timed(ctx context.Context, f func(context.Context) error) (time.Duration, error) {
	start := time.Now()
	err := f(ctx)
	return time.Since(start), err
}

// once is f run at most once: later calls return the first's error.
func once(f func(context.Context) error) func(context.Context) error {
	var o sync.Once
	var err error
	return func(ctx context.Context) error {
		o.Do(func() { err = f(ctx) })
		return err
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
