package redisconn_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/locklab/locklab/internal/redisconn"
	"github.com/locklab/locklab/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// trips counts what the hooks after the first see: single commands and
// pipelines, each one round trip (a new connection's HELLO aside).
type trips struct{ single, pipelines atomic.Int32 }

func (*trips) DialHook(next redis.DialHook) redis.DialHook { return next }
func (t *trips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() != "hello" {
			t.single.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (t *trips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { t.pipelines.Add(1); return next(ctx, cmds) }
}

// readBack is a script that answers what the key holds when it runs.
var readBack = redis.NewScript(`return redis.call('GET', KEYS[1])`)

// An Ahead command goes in the same round trip as the next command sent
// with its context, and Redis runs it first: the script after it reads what
// it wrote. It goes once; the hooks after the first see one pipeline.
func TestAheadGoesFirst(t *testing.T) {
	c := redistest.Start(t).Client()
	var seen trips
	c.AddHook(&seen)
	ctx := context.Background()
	if err := readBack.Load(ctx, c).Err(); err != nil {
		t.Fatal(err)
	}
	seen.single.Store(0)
	set := redis.NewStatusCmd(ctx, "set", "k", "written")
	a := redisconn.NewAhead(set)
	if _, sent := a.Sent(); sent {
		t.Fatal("sent before anything was")
	}
	actx := redisconn.WithAhead(ctx, a)
	got, err := readBack.Run(actx, c, []string{"k"}).Text()
	if err != nil || got != "written" {
		t.Fatalf("the command after the ahead one read %q, %v: want %q (the ahead write first)", got, err, "written")
	}
	if _, sent := a.Sent(); !sent || set.Err() != nil || set.Val() != "OK" {
		t.Fatalf("ahead: sent %v, reply %q, %v", sent, set.Val(), set.Err())
	}
	if s, p := seen.single.Load(), seen.pipelines.Load(); s != 0 || p != 1 {
		t.Fatalf("the hooks after saw %d commands and %d pipelines, want one pipeline", s, p)
	}
	// Once: the next command with the same context goes alone.
	if err := c.Set(actx, "k", "again", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if s, p := seen.single.Load(), seen.pipelines.Load(); s != 1 || p != 1 {
		t.Fatalf("after: %d commands and %d pipelines, want one of each", s, p)
	}
}

// A pipeline sent with the context carries the Ahead command at its head;
// its own commands' errors are its own.
func TestAheadHeadsAPipeline(t *testing.T) {
	c := redistest.Start(t).Client()
	ctx := context.Background()
	a := redisconn.NewAhead(redis.NewStatusCmd(ctx, "set", "k", "first"))
	pipe := c.Pipeline()
	get := pipe.Get(ctx, "k")
	if _, err := pipe.Exec(redisconn.WithAhead(ctx, a)); err != nil {
		t.Fatal(err)
	}
	if get.Val() != "first" {
		t.Fatalf("the pipeline read %q, want the ahead write's %q", get.Val(), "first")
	}
	if _, sent := a.Sent(); !sent {
		t.Fatal("not sent")
	}
}

// Nothing sent with the context: the Ahead command was not sent either, and
// says so.
func TestAheadNotSentAlone(t *testing.T) {
	c := redistest.Start(t).Client()
	ctx := context.Background()
	a := redisconn.NewAhead(redis.NewStatusCmd(ctx, "set", "k", "never"))
	_ = redisconn.WithAhead(ctx, a)
	if err := c.Set(ctx, "other", "1", 0).Err(); err != nil { // another context
		t.Fatal(err)
	}
	if _, sent := a.Sent(); sent {
		t.Fatal("sent with a command of another context")
	}
	if n := c.Exists(ctx, "k").Val(); n != 0 {
		t.Fatal("the ahead command ran")
	}
}
