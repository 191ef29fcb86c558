package zk

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/locklab/locklab/internal/step"
)

// call runs f, a ZooKeeper request (the client's take no context), and
// returns its result, or ctx's error when ctx ends first: f goes on, and
// what it returns then is dropped. what describes the request for the
// lab's step-through (gated); "" for one it does not show.
func call[T any](ctx context.Context, what string, f func() (T, error)) (T, error) {
	if what != "" {
		return gated(ctx, what, func() (T, error) { return call(ctx, "", f) })
	}
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := f()
		for errors.Is(err, zk.ErrNoServer) && pause(ctx) { // never sent: try again
			v, err = f()
		}
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

// gated sends one request to ZooKeeper, f, as a step of ctx's stepped sale
// (the lab's step-through): stopped before it, recorded as what with its
// reply, as the gates in the Redis, etcd and SQL clients do; any other
// request pays one context lookup. go-zookeeper has no hook, and the recipe
// sends its requests from goroutines of their own (call), so the gate is
// here, at the recipe's call sites on the sale's goroutine. The holder's
// own reads of its node (keep) and the removal of a node left behind
// (abandon) are not shown.
func gated[T any](ctx context.Context, what string, f func() (T, error)) (T, error) {
	if step.From(ctx) == nil {
		return f()
	}
	if err := step.Stop(ctx, what); err != nil {
		var zero T
		return zero, err
	}
	v, err := f()
	step.Done(ctx, zkReply(v, err))
	return v, err
}

// zkReply is a request's reply in short: a created node's path, a queue
// in its order, whether a node is there, OK, or the error.
func zkReply(v any, err error) string {
	if err != nil {
		return "(error) " + err.Error()
	}
	switch v := v.(type) {
	case []string:
		return "[" + strings.Join(order(v), ", ") + "]"
	case <-chan zk.Event:
		if v == nil {
			return "false (gone)"
		}
		return "true, watched"
	case *zk.Stat:
		return fmt.Sprintf("true, czxid %d", v.Czxid)
	case interface{ path() string }:
		return v.path()
	}
	return "OK"
}

// pause waits a moment before a request go-zookeeper never sent is tried
// again, and says whether to (false: ctx ended first). go-zookeeper fails
// every request queued while it has tried each member once without a
// connection with ErrNoServer, unsent: in a leader's election the others
// refuse clients for a second or more, so a sale 3 s into its 5 s deadline
// answered 503 while its session still lived and reconnected (node-down on
// Compose, zk: "could not connect to a server"). Its deadline, not one pass
// over the members, bounds the wait.
func pause(ctx context.Context) bool {
	t := time.NewTimer(100 * time.Millisecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
