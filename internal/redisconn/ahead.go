package redisconn

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Ahead is a command sent in one round trip ahead of the first command (or
// pipeline) sent with a context carrying it (WithAhead), on one connection,
// so Redis runs it first. The sale sends its write of the stock so, ahead of
// its lock's release: the lock is not held one round trip longer only to
// wait for the write's reply, and the release's code does not change
// (lease.Rider is the acquisition's side: the read rides with a hand-off's
// claim).
//
// The hook that sends it is in every client New and NewFailover make, as
// the first (outermost) hook, so the hooks after it see one round trip: the
// pipeline it makes. The caller reads the command's reply after the command
// it was to go ahead of returned, and only if it was sent (Sent): when
// nothing was sent with the context, neither was it.
type Ahead struct {
	cmd redis.Cmder

	mu   sync.Mutex
	sent bool
	at   time.Time
}

// NewAhead returns an Ahead for cmd, not sent yet.
func NewAhead(cmd redis.Cmder) *Ahead { return &Ahead{cmd: cmd} }

type aheadKey struct{}

// WithAhead returns ctx carrying a, for the release made with it.
func WithAhead(ctx context.Context, a *Ahead) context.Context {
	return context.WithValue(ctx, aheadKey{}, a)
}

// take claims a's command for the round trip about to leave at; false when
// ctx carries none, or it went already.
func take(ctx context.Context) (redis.Cmder, bool) {
	a, _ := ctx.Value(aheadKey{}).(*Ahead)
	if a == nil {
		return nil, false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.sent {
		return nil, false
	}
	a.sent, a.at = true, time.Now()
	return a.cmd, true
}

// Sent reports whether the command went ahead of the release, and when.
func (a *Ahead) Sent() (time.Time, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.at, a.sent
}

// aheadHook is the go-redis hook that sends a context's Ahead command. It
// must be the client's first hook (the outermost), so that the hooks after
// it see one round trip: the pipeline it makes.
type aheadHook struct {
	client interface{ Pipeline() redis.Pipeliner }
}

// DialHook changes nothing.
func (aheadHook) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook sends a single command with the Ahead command before it, as
// one pipeline.
func (h aheadHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		first, ok := take(ctx)
		if !ok {
			return next(ctx, cmd)
		}
		pipe := h.client.Pipeline()
		_ = pipe.Process(ctx, first)
		_ = pipe.Process(ctx, cmd)
		_, _ = pipe.Exec(ctx) // each command keeps its own reply
		return cmd.Err()
	}
}

// ProcessPipelineHook puts the Ahead command at the head of a pipeline.
func (h aheadHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		first, ok := take(ctx)
		if !ok {
			return next(ctx, cmds)
		}
		_ = next(ctx, append([]redis.Cmder{first}, cmds...))
		for _, c := range cmds {
			if err := c.Err(); err != nil {
				return err
			}
		}
		return nil
	}
}
