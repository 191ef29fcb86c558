package step

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Hook is the gate in a go-redis client (client.AddHook(step.Hook{})): a
// command or pipeline of an armed sale stops before it is sent and is
// recorded with its reply; any other goes straight through after one
// context lookup.
type Hook struct {
	// Node names the client's server in each step it records (Step.Node),
	// for a lock that sends the same command to several: Redlock's
	// per-node SETs would otherwise read alike, and the one a node
	// refused could not be told from the ones it granted. "": the
	// stock's node, which every story reads and needs no name.
	Node string
}

// DialHook passes dials through.
func (Hook) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook gates one command.
func (h Hook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		s := From(ctx)
		if s == nil || setup[cmd.Name()] {
			return next(ctx, cmd)
		}
		var err error
		if serr := s.run(ctx, h.Node, Describe(cmd), func() string { err = next(ctx, cmd); return Reply(cmd, err) }); serr != nil {
			cmd.SetErr(serr)
			return serr
		}
		return err
	}
}

// ProcessPipelineHook gates a pipeline as one step: it is one round trip.
func (h Hook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		s := From(ctx)
		if s == nil || len(cmds) == 0 || setup[cmds[0].Name()] {
			return next(ctx, cmds)
		}
		what, replies := make([]string, len(cmds)), make([]string, len(cmds))
		for i, c := range cmds {
			what[i] = Describe(c)
		}
		var err error
		serr := s.run(ctx, h.Node, strings.Join(what, "; "), func() string {
			err = next(ctx, cmds)
			for i, c := range cmds {
				replies[i] = Reply(c, c.Err())
			}
			return strings.Join(replies, "; ")
		})
		if serr != nil {
			for _, c := range cmds {
				c.SetErr(serr)
			}
			return serr
		}
		return err
	}
}

// setup are the commands go-redis sends to set a new connection up, inside
// the command that needed it: not the sale's steps.
var setup = map[string]bool{"hello": true, "auth": true, "select": true, "client": true, "readonly": true}

// maxArg is the longest argument shown whole; a longer one (a script's
// source in EVAL) is cut. A lock's owner is shown whole, as the store
// panel names its holder by it: ours is 41 characters, redislock's token
// before it 22 more.
const maxArg = 80

// Describe is cmd as sent, redis-cli style: "SET inventoryRedisLock
// 7f3c...:42 NX PX 10000".
func Describe(cmd redis.Cmder) string {
	var b strings.Builder
	for i, a := range cmd.Args() {
		if i > 0 {
			b.WriteByte(' ')
		}
		s := fmt.Sprint(a)
		if i == 0 {
			s = strings.ToUpper(s)
		}
		if len(s) > maxArg {
			s = strings.Join(strings.Fields(s[:maxArg]), " ") + "…"
		}
		if s == "" || strings.ContainsAny(s, " \n\t\"") {
			s = strconv.Quote(s)
		}
		b.WriteString(s)
	}
	return b.String()
}

// Reply is cmd's reply, redis-cli style: OK, "10" (a bulk string), 0,
// (nil), (error) ... err is what sending it returned: inside a hook,
// go-redis has not yet set it on cmd (EVALSHA's NOSCRIPT).
func Reply(cmd redis.Cmder, err error) string {
	if err == nil {
		err = cmd.Err()
	}
	if err != nil {
		if errors.Is(err, redis.Nil) {
			return "(nil)"
		}
		return "(error) " + err.Error()
	}
	switch c := cmd.(type) {
	case *redis.StatusCmd:
		return c.Val()
	case *redis.StringCmd:
		return strconv.Quote(c.Val())
	case *redis.IntCmd:
		return strconv.FormatInt(c.Val(), 10)
	case *redis.BoolCmd: // SET ... NX: OK or nil; SETNX, EXPIRE: 1 or 0
		switch {
		case c.Name() == "set" && c.Val():
			return "OK"
		case c.Name() == "set":
			return "(nil)"
		case c.Val():
			return "1"
		}
		return "0"
	case *redis.Cmd:
		return value(c.Val())
	case *redis.SliceCmd:
		return value(c.Val())
	}
	// Any other: what go-redis prints after the command.
	if _, after, ok := strings.Cut(cmd.String(), ": "); ok {
		return after
	}
	return cmd.String()
}

// value is a script's or a generic command's reply.
func value(v any) string {
	switch v := v.(type) {
	case nil:
		return "(nil)"
	case string:
		return strconv.Quote(v)
	case []any:
		parts := make([]string, len(v))
		for i, e := range v {
			parts[i] = value(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	return fmt.Sprint(v)
}
