package sale

import (
	"context"
	"time"

	"github.com/locklab/locklab/internal/chaos"
	"github.com/locklab/locklab/internal/lease"
	"github.com/locklab/locklab/internal/step"
	"github.com/redis/go-redis/v9"
)

// firstRead is the sale's read of the stock riding with its lock's last
// step (lease.Rider: a hand-off's claim of its grant), so that a hand-over
// costs no round trip of its own. Its reply is used only when the claim
// held, and only under the fencing the sale then reads with; otherwise the
// sale reads as it always does. Nil (a stepped sale, whose every command is
// a step of its own; a lock switched off): no rider, the sale reads itself.
type firstRead struct {
	s     *Service
	m     Method
	owner string
	r     *lease.Rider
	f     *fencing // the fencing the read was sent with (nil: unfenced)
	get   *redis.StringCmd
	fence *redis.Cmd
}

// rider returns the sale's first read, ready to ride with m's acquisition
// by owner; nil when it cannot (a lock whose acquisition carries nothing)
// or must not.
func (s *Service) rider(ctx context.Context, m Method, owner string) *firstRead {
	if !m.Rides || step.From(ctx) != nil || chaos.From(ctx).Off.Lock {
		return nil
	}
	fr := &firstRead{s: s, m: m, owner: owner}
	fr.r = lease.NewRider(fr.queue)
	return fr
}

// context is ctx carrying the rider for the acquisition.
func (fr *firstRead) context(ctx context.Context) context.Context {
	if fr == nil {
		return ctx
	}
	return lease.WithRider(ctx, fr.r)
}

// queue adds the read to pipe, for a grant that came with token: a GET, or
// fenced the fenced script's read. A grant whose token the sale would refuse
// (ErrNoToken) rides with nothing.
func (fr *firstRead) queue(pipe redis.Pipeliner, token int64) {
	ctx := context.Background() // a pipeline's commands run with Exec's context
	fr.get, fr.fence, fr.f = nil, nil, nil
	f, err := fr.s.fence(ctx, fr.m, token, fr.owner)
	switch {
	case err != nil:
	case f == nil:
		fr.get = pipe.Get(ctx, fr.s.key)
	default:
		fr.f = f
		fr.fence = fencedScript.EvalSha(ctx, pipe, []string{fr.s.key, f.key}, f.token, f.owner, "")
	}
}

// rode reports whether the read rode with the acquisition that obtained the
// lock, and when that round trip was sent.
func (fr *firstRead) rode() (time.Time, bool) {
	if fr == nil {
		return time.Time{}, false
	}
	return fr.r.Rode()
}

// reply is the read that rode with the claim, when it did, under the
// fencing f the sale reads with (ok false: the sale reads itself).
func (fr *firstRead) reply(f *fencing) (n int64, ok bool, err error) {
	if _, rode := fr.rode(); !rode {
		return 0, false, nil
	}
	switch {
	case f == nil && fr.get != nil && fr.f == nil:
		n, err = fr.s.stock(fr.get)
		return n, true, err
	case f != nil && fr.fence != nil && fr.f != nil && *fr.f == *f && !redis.HasErrorPrefix(fr.fence.Err(), "NOSCRIPT"):
		n, err = fr.s.fencedRead(fr.fence, f)
		return n, true, err
	}
	return 0, false, nil
}
