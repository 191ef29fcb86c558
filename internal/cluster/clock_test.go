package cluster

import (
	"context"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/redisconn"
	"github.com/locklab/locklab/internal/redistest"
)

// A real redis-server with the clock shim: JumpClock moves its wall clock
// (TIME) at once, a key with a lease expires early on it, and 0 brings the
// real time back. Its monotonic clock is untouched (Redis still serves).
func TestJumpClock(t *testing.T) {
	if _, err := exec.LookPath("cc"); err != nil {
		t.Skip("no C compiler (cc): the clock shim needs one")
	}
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("no redis-server")
	}
	ctx := context.Background()
	dir := t.TempDir()
	port := redistest.FreePort(t)
	p := Proc{Name: "redis-" + strconv.Itoa(port), Addr: "127.0.0.1:" + strconv.Itoa(port), Log: filepath.Join(dir, "redis.log"),
		Args: []string{bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir}}
	s := State{Redis: []Proc{p}}
	planClock(dir, &s)
	if err := buildClockShim(ctx, dir, s.Redis); err != nil {
		t.Fatal(err)
	}
	if err := s.Redis[0].start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(s.Redis[0].Pid, syscall.SIGKILL) })
	rdb := redisconn.New(p.Addr, "")
	defer rdb.Close()
	c := &Cluster{dir: dir, State: s}
	deadline := time.Now().Add(10 * time.Second)
	for rdb.Ping(ctx).Err() != nil { // the server answering: observable state
		if time.Now().After(deadline) {
			t.Fatal("redis-server with the clock shim never answered; see " + p.Log)
		}
		time.Sleep(10 * time.Millisecond)
	}
	skew := func() time.Duration {
		t.Helper()
		now, err := rdb.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		return now.Sub(time.Now())
	}
	if d := skew(); d.Abs() > time.Second {
		t.Fatalf("with no offset the node's clock is %v off", d)
	}
	if err := rdb.Set(ctx, "lease", "holder", 5*time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.JumpClock(p.Name, time.Hour); err != nil {
		t.Fatal(err)
	}
	if d := skew(); d < time.Hour-time.Second || d > time.Hour+time.Second {
		t.Fatalf("after a jump of 1h the node's clock is %v ahead", d)
	}
	if n, err := rdb.Exists(ctx, "lease").Result(); err != nil || n != 0 {
		t.Fatalf("a 5 min lease after a 1 h jump: exists = %d (err %v), want expired", n, err)
	}
	if err := c.JumpClock(p.Name, 0); err != nil {
		t.Fatal(err)
	}
	if d := skew(); d.Abs() > time.Second {
		t.Fatalf("back to the real time, the node's clock is %v off", d)
	}
	if err := (&Cluster{dir: dir, State: State{Redis: []Proc{{Name: "redis-1"}}}}).JumpClock("redis-1", time.Second); err == nil {
		t.Fatal("JumpClock on a node without the shim: no error")
	}
}
