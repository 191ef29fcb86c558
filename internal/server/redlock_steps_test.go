package server_test

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/api"
	"github.com/locklab/locklab/internal/locktest"
	"github.com/locklab/locklab/internal/step"
)

// Redlock's restart story, stepped on real nodes as the lab plays it: a
// stepped Redlock sale stops before each attempt (its per-node SETs run in
// goroutines of redsync's, which the gate records, each named by its node,
// but cannot stop), and GET /store?lock=redlock reads the key on every
// node. Node 3 is down while A takes the lock (A holds nodes 1 and 2, a
// majority); node 2 restarts empty and node 3 comes back; B then takes
// nodes 2 and 3, a majority, while A's key lives on node 1: both sell,
// one unit twice. With node 2 kept down (the delayed restart) B is
// refused, and waits until it gives up.
func TestSteppedRedlockRestart(t *testing.T) {
	for _, delay := range []bool{false, true} {
		name := map[bool]string{false: "restart", true: "delay"}[delay]
		t.Run(name, func(t *testing.T) {
			// Last (cleanups run in reverse): go-redis retries a node it
			// could not dial once a second until it answers or its client
			// closes; the nodes are all up again by then.
			t.Cleanup(func() {
				locktest.WaitFor(t, 5*time.Second, "go-redis's dial retries of the stopped nodes ended", func() bool {
					buf := make([]byte, 1<<20)
					return !strings.Contains(string(buf[:runtime.Stack(buf, true)]), "pool.(*ConnPool).tryDial")
				})
			})
			g := step.New(step.Options{Wait: 300 * time.Millisecond})
			t.Cleanup(g.Close)
			s := newStack(t, options{lock: "v6", override: true, steps: g, lessonLease: 10 * time.Second})
			ctx := context.Background()
			s.rdb.Set(ctx, api.DefaultStockKey, 10, 0)
			n1, n2, n3 := s.nodes[0].Addr, s.nodes[1].Addr, s.nodes[2].Addr
			nodeOf := func(addr string) string { return "redis-" + addr[strings.LastIndexByte(addr, ':')+1:] }
			// store is the lock key's owner on each node ("-": none, "down").
			store := func() []string {
				t.Helper()
				r := s.do(t, "GET", "/store?lock=redlock", "")
				s.expect(t, r, 200, nil)
				nodes, _ := r.body["nodes"].([]any)
				var out []string
				for i, n := range nodes {
					n := n.(map[string]any)
					if n["node"] != nodeOf(s.nodes[i].Addr) {
						t.Fatalf("node %d of the store is %v, want %s", i, n["node"], nodeOf(s.nodes[i].Addr))
					}
					switch lock, _ := n["lock"].(map[string]any); {
					case n["down"] != nil:
						out = append(out, "down")
					case lock == nil:
						out = append(out, "-")
					default:
						out = append(out, lock["owner"].(string))
					}
				}
				return out
			}
			// attempt steps w's Redlock attempt and answers its reply and
			// what each node answered, by name.
			attempt := func(w string) (string, map[string]string) {
				t.Helper()
				r := s.do(t, "POST", "/steps/"+w+"/next", "")
				s.expect(t, r, 200, map[string]any{"state": "stopped"})
				done := r.body["done"].([]any)
				nodes, reply := map[string]string{}, ""
				for _, d := range done {
					d := d.(map[string]any)
					cmd, _ := d["command"].(string)
					switch {
					case strings.HasPrefix(cmd, "Redlock: SET "+api.DefaultLockKey+" "):
						reply = d["reply"].(string)
					case d["phase"] == step.Background && strings.HasPrefix(cmd, "SET "+api.DefaultLockKey):
						nodes[d["node"].(string)] = d["reply"].(string)
					}
				}
				return reply, nodes
			}

			s.nodes[2].Stop()
			r := s.do(t, "POST", "/sale?step=A&lock=redlock&lease=30s", "")
			s.expect(t, r, 202, map[string]any{"state": "stopped", "phase": "acquire"})
			if next := r.body["next"].(map[string]any)["command"].(string); !strings.HasPrefix(next, "Redlock: SET "+api.DefaultLockKey) || !strings.Contains(next, "NX, lease 30s, on each of 3 nodes, 2 to hold it") {
				t.Fatalf("A stopped before %q, want its Redlock attempt, its lease 30 s", next)
			}
			if got := store(); got[0] != "-" || got[1] != "-" || got[2] != "down" {
				t.Fatalf("before A's attempt the nodes hold %v, want -, -, down", got)
			}
			reply, nodes := attempt("A")
			if reply != "OK" || nodes[nodeOf(n2)] != "OK" || !strings.HasPrefix(nodes[nodeOf(n3)], "(error)") {
				t.Fatalf("A's attempt answered %q, its nodes %v: want OK, granted by 2 of 3, the third down", reply, nodes)
			}
			a := store()
			if a[0] == "-" || a[1] != a[0] || a[2] != "down" {
				t.Fatalf("after A's attempt the nodes hold %v: want A's key on the first two, the third down", a)
			}
			owner := a[0]
			s.expect(t, s.do(t, "POST", "/steps/A/next", ""), 200, map[string]any{"phase": "stock"}) // reads 10

			s.nodes[1].Stop() // B crashes; without persistence it forgets every key
			if !delay {
				s.nodes[1].Restart()
			}
			s.nodes[2].Restart()
			if got := store(); got[0] != owner || got[2] != "-" || (delay && got[1] != "down") || (!delay && got[1] != "-") {
				t.Fatalf("after the restart the nodes hold %v: want A's key on the first only", got)
			}

			s.expect(t, s.do(t, "POST", "/sale?step=B&lock=redlock&lease=30s", ""), 202, map[string]any{"state": "stopped"})
			reply, nodes = attempt("B")
			if delay {
				if reply != "(nil)" || nodes[nodeOf(n1)] != "(nil)" || !strings.HasPrefix(nodes[nodeOf(n2)], "(error)") || nodes[nodeOf(n3)] != "OK" {
					t.Fatalf("B's attempt with node 2 down answered %q, its nodes %v: want refused, 1 of 3", reply, nodes)
				}
				if got := store(); got[0] != owner || got[1] != "down" || got[2] != "-" {
					t.Fatalf("after B's refused attempt the nodes hold %v: want A's key on the first, B's SET on the third undone", got)
				}
				r = s.do(t, "POST", "/steps/B/end", "")
				if res := r.body["result"].(map[string]any); r.body["state"] != "done" || res["reply"].(map[string]any)["code"] != "lock_timeout" {
					t.Fatalf("B with node 2 down: %v, want it to give up (lock_timeout)", r.body)
				}
				r = s.do(t, "POST", "/steps/A/end", "")
				if res := r.body["result"].(map[string]any)["reply"].(map[string]any); res["sold"] != true || res["remaining"] != 9.0 {
					t.Fatalf("A: %v, want sold, 9 left", res)
				}
				if s.stock(t) != "9" {
					t.Fatalf("the stock is %s, want 9: one unit sold once", s.stock(t))
				}
				s.nodes[1].Restart() // A's lease over: the delayed node comes back
				return
			}
			if reply != "OK" || nodes[nodeOf(n1)] != "(nil)" || nodes[nodeOf(n2)] != "OK" || nodes[nodeOf(n3)] != "OK" {
				t.Fatalf("B's attempt answered %q, its nodes %v: want OK, granted by the restarted two", reply, nodes)
			}
			b := store()
			if b[0] != owner || b[1] == owner || b[1] == "-" || b[2] != b[1] {
				t.Fatalf("after B's attempt the nodes hold %v: want A's key on the first, B's on the others: two holders", b)
			}
			s.expect(t, s.do(t, "POST", "/steps/B/next", ""), 200, map[string]any{"phase": "stock"}) // reads 10
			for _, w := range []string{"A", "B"} {
				r = s.do(t, "POST", "/steps/"+w+"/end", "")
				if res := r.body["result"].(map[string]any)["reply"].(map[string]any); res["sold"] != true || res["remaining"] != 9.0 {
					t.Fatalf("%s: %v, want sold, 9 left", w, res)
				}
			}
			if s.stock(t) != "9" {
				t.Fatalf("the stock is %s after both sold, want 9: one unit sold twice", s.stock(t))
			}
		})
	}
}
