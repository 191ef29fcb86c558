package sale

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/locklab/locklab/internal/chaos"
	"github.com/locklab/locklab/internal/redisconn"
	"github.com/locklab/locklab/internal/step"
	"github.com/redis/go-redis/v9"
)

// replicated waits, when asked (Options.ReplicaAck or the request's
// replica_ack hook), until enough replicas of the stock's node have
// acknowledged the sale's write: short of them, or with the wait's reply
// lost, the sale is ErrIndeterminate. The write stands on the primary, but
// a failover to a replica that missed it would lose it (seed 004's problem
// 4, for the stock rather than the lock).
func (s *Service) replicated(ctx context.Context) error {
	n := chaos.WriteAckWait(ctx, s.replicaAck)
	if n == 0 {
		return nil
	}
	got, err := redisconn.WaitReplicas(ctx, s.rdb, s.key+":ack", n, redisconn.ReplicaWait)
	if err != nil {
		return fmt.Errorf("sale: waiting for the stock write's replication: %w: %w", ErrIndeterminate, err)
	}
	if got < n {
		return fmt.Errorf("sale: the stock write reached %d of %d replicas within %s: %w", got, n, redisconn.ReplicaWait, ErrIndeterminate)
	}
	return nil
}

// Stock reads the stock. A missing key is ErrStockMissing, never zero.
func (s *Service) Stock(ctx context.Context) (int64, error) {
	return s.stock(s.rdb.Get(ctx, s.key))
}

// stock reads a GET of the stock.
func (s *Service) stock(cmd *redis.StringCmd) (int64, error) {
	v, err := cmd.Result()
	if errors.Is(err, redis.Nil) {
		return 0, fmt.Errorf("%w: %s", ErrStockMissing, s.key)
	}
	if err != nil {
		return 0, fmt.Errorf("sale: read stock: %w", err)
	}
	return s.parse(v)
}

// parse reads a stock value, or ErrStockCorrupt.
func (s *Service) parse(v string) (int64, error) {
	n, ok := ParseStock(v)
	if !ok {
		return 0, fmt.Errorf("%w: %s = %q", ErrStockCorrupt, s.key, v)
	}
	return n, nil
}

// ParseStock reads a stock value the way Redis reads an integer (DECR, and
// decrement.lua, which must agree with it): the canonical decimal form of an
// int64, so " 5", "+5", "05", "-0" and "1e3" are not numbers here although
// strconv.ParseInt or Lua's tonumber take some of them.
func ParseStock(v string) (int64, bool) {
	n, err := strconv.ParseInt(v, 10, 64)
	return n, err == nil && strconv.FormatInt(n, 10) == v
}

// SetStock sets the stock (resetting it between runs).
func (s *Service) SetStock(ctx context.Context, n int64) error {
	if n < 0 {
		return fmt.Errorf("sale: stock must not be negative, got %d", n)
	}
	if err := s.rdb.Set(ctx, s.key, n, 0).Err(); err != nil {
		return fmt.Errorf("sale: write stock: %w", err)
	}
	return nil
}

// fencedRead reads the fenced script's reply to a read.
func (s *Service) fencedRead(cmd *redis.Cmd, f *fencing) (int64, error) {
	reply, err := cmd.Slice()
	if err != nil {
		return 0, fmt.Errorf("sale: fenced read of stock: %w", err)
	}
	if reply[0] != int64(1) {
		return 0, fmt.Errorf("%w: read with token %d", ErrFenced, f.token)
	}
	if len(reply) < 2 || reply[1] == nil {
		return 0, fmt.Errorf("%w: %s", ErrStockMissing, s.key)
	}
	return s.parse(fmt.Sprint(reply[1]))
}

// write writes the stock: a SET, or with fencing the fenced script; when
// the hold h says so, in one round trip with its release (writeAhead). It
// returns when the stock was written (when the write was sent, if it left
// with the release).
func (s *Service) write(ctx context.Context, h *hold, n int64, f *fencing) (time.Time, error) {
	if h != nil && h.ahead {
		return s.writeAhead(ctx, h, n, f)
	}
	if f == nil {
		if err := s.rdb.Set(ctx, s.key, n, 0).Err(); err != nil {
			return time.Time{}, writeError("sale: write stock", err)
		}
		return time.Now(), nil
	}
	err := s.fencedWrite(fencedScript.Run(ctx, s.rdb, []string{s.key, f.key}, f.token, f.owner, n), f)
	return time.Now(), err
}

// fencedWrite reads the fenced script's reply to a write.
func (s *Service) fencedWrite(cmd *redis.Cmd, f *fencing) error {
	reply, err := cmd.Slice()
	if err != nil {
		return writeError("sale: fenced write of stock", err)
	}
	if reply[0] != int64(1) {
		return fmt.Errorf("%w: write with token %d", ErrFenced, f.token)
	}
	return nil
}

// writeError is a failed write of the stock: ErrIndeterminate when its reply
// was lost, so that nobody reports "nothing sold" for a write that may have
// happened.
func writeError(what string, err error) error {
	if redisconn.Ambiguous(err) && !errors.Is(err, step.ErrCancelled) { // a cancelled step sent nothing
		return fmt.Errorf("%s: %w: %w", what, ErrIndeterminate, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}
