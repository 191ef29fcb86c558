//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/locklab/locklab/internal/api"
	"github.com/locklab/locklab/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// TestLessonStepThrough plays the lab's step-through stories on a stack
// started as make up starts it (no -chaos, the replicas' own -ttl), one
// click per step, and reads from Redis itself, at the step that tells, what
// each story claims: v2's two sales read the same stock and sold one unit
// twice; v4's lock became B's and A's DEL removed it while B still worked;
// v6 in v4's order answered A's release with 0, B's lock kept; v6 fenced
// refused A's write. The lease is the lesson's (10 s), run out for real.
// Each ending is kept as a picture at 1280 and 390 px ($LAB_SCREENSHOTS).
func TestLessonStepThrough(t *testing.T) {
	bin := clusterBin(t)
	port := redistest.FreePort(t)
	dir := t.TempDir()
	c := up(t, bin, port, dir)
	rdb := redis.NewClient(&redis.Options{Addr: c.State.StockNode().Addr, Password: c.State.RedisPassword})
	defer rdb.Close()
	ctx, problems := browser(t)
	base := fmt.Sprintf("http://localhost:%d/", port)
	bg := context.Background()
	lockKey, stockKey := api.DefaultLockKey, api.DefaultStockKey
	redisGet := func(key string) string {
		v, err := rdb.Get(bg, key).Result()
		if err == redis.Nil {
			return "(none)"
		} else if err != nil {
			t.Fatalf("GET %s: %v", key, err)
		}
		return v
	}
	page := func(js string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Evaluate[string](js))
		if err != nil {
			t.Fatalf("%s: %v", js, err)
		}
		return s
	}
	// open shows a story by its address, as a link would.
	loaded := false
	open := func(name string) {
		t.Helper()
		if loaded { // the same page, another address: its hash
			page(`location.hash = "#/lesson/` + name + `", ""`)
		} else if err := chromedp.Do(ctx, chromedp.Navigate(base+"#/lesson/"+name)); err != nil {
			t.Fatal(err)
		}
		loaded = true
		waitFor(t, ctx, "story "+name+" shown, not started",
			`document.querySelector("#steps-panel").dataset.preset === "`+name+`" && document.querySelector("#steps-panel").dataset.started === "false" && !document.querySelector("#preset-next").hidden`)
	}
	// click plays the story's next step, once the page allows it, and
	// waits until the page has taken it: at steps taken.
	click := func(at int) {
		t.Helper()
		waitFor(t, ctx, fmt.Sprintf("the story's step %d offered", at), `!document.querySelector("#preset-next").disabled`)
		page(`document.querySelector("#preset-next").click(), ""`)
		waitFor(t, ctx, fmt.Sprintf("the story's step %d taken", at),
			fmt.Sprintf(`document.querySelector("#steps-panel").dataset.started === "true" && document.querySelector("#steps-panel").dataset.at === "%d" && document.querySelector("#steps-panel").dataset.busy === "false"`, at))
	}
	start := func() {
		t.Helper()
		click(0)
		if got := redisGet(stockKey); got != "10" {
			t.Fatalf("the story started with stock %s in Redis, want 10", got)
		}
	}
	reply := func(w, phase string, i int) string { // sale w's i-th done step of phase, its reply
		return page(fmt.Sprintf(`[...document.querySelectorAll("#lane-%s li.step:not([data-next]) ")].filter((li) => li.dataset.phase === %q)[%d]?.querySelector(".reply").textContent || ""`, w, phase, i))
	}
	command := func(w, phase string, i int) string {
		return page(fmt.Sprintf(`[...document.querySelectorAll("#lane-%s li.step:not([data-next]) ")].filter((li) => li.dataset.phase === %q)[%d]?.querySelector(".cmd").textContent || ""`, w, phase, i))
	}
	laneState := func(w string) string { return page(`document.querySelector("#lane-` + w + `").dataset.state`) }
	verdict := func(word, text string) {
		t.Helper()
		waitFor(t, ctx, "the verdict: "+word+", saying "+text,
			`document.querySelector("#steps-verdict").dataset.word === "`+word+`" && document.querySelector("#steps-verdict").textContent.includes(`+fmt.Sprintf("%q", text)+`)`)
		if n := rdb.Exists(bg, lockKey).Val(); n != 0 {
			t.Errorf("the story ended with a lock key left: %s", redisGet(lockKey))
		}
	}
	shots := func(name string) {
		t.Helper()
		for _, w := range []int64{1280, 390} {
			if err := chromedp.Do(ctx, chromedp.EmulateViewport(w, 900)); err != nil {
				t.Fatal(err)
			}
			png, err := chromedp.Run(ctx, chromedp.Screenshot("#steps-panel"))
			if err != nil {
				t.Fatalf("screenshot %s at %d px: %v", name, w, err)
			}
			dir := os.Getenv("LAB_SCREENSHOTS")
			if dir == "" {
				dir = t.TempDir()
			}
			path := filepath.Join(dir, fmt.Sprintf("lesson-%s-%d.png", name, w))
			if err := os.WriteFile(path, png, 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("screenshot: %s", path)
		}
		if err := chromedp.Do(ctx, chromedp.EmulateViewport(1300, 1100)); err != nil {
			t.Fatal(err)
		}
	}
	// acquired checks, from Redis, that w's lock command just took the key:
	// the key holds the owner its command sent. It returns that owner.
	acquired := func(w string) string {
		t.Helper()
		owner := redisGet(lockKey)
		if cmd := command(w, "acquire", 0); owner == "(none)" || !strings.Contains(cmd, owner) {
			t.Fatalf("after %s's acquire (%q) the lock key holds %q: not %s's", w, cmd, owner, w)
		}
		if ttl := rdb.PTTL(bg, lockKey).Val(); ttl <= 0 || ttl > 10*time.Second {
			t.Fatalf("%s's lock has %v left, want the lesson's lease (at most 10 s)", w, ttl)
		}
		return owner
	}

	// v2: both read 10, both write 9.
	open("v2")
	start()
	click(1)
	click(2)
	if a, b, s := reply("A", "stock", 0), reply("B", "stock", 0), redisGet(stockKey); a != `"10"` || b != a || s != "10" {
		t.Fatalf("v2: A's GET answered %s, B's %s, Redis holds %s: want both the stock Redis holds, 10", a, b, s)
	}
	for at := 3; at <= 6; at++ {
		click(at)
	}
	verdict("violated", "One unit sold twice")
	if s, sold := redisGet(stockKey), page(`String(document.querySelectorAll(".lane li.result[data-sold=true]").length)`); s != "9" || sold != "2" {
		t.Fatalf("v2: %s sales answered sold, and Redis holds stock %s: want 2 sold and 9 (one unit sold twice)", sold, s)
	}
	shots("v2")

	// v4, then v6 in v4's order, then v6 fenced: A takes the lock, reads,
	// checks, outlasts the lease; B takes the lock and reads; A writes and
	// releases; B runs to its end.
	for _, story := range []string{"v4", "v6", "v6-fence"} {
		open(story)
		start()
		click(1)
		ownerA := acquired("A")
		click(2)
		click(3)
		click(4) // offered once the lock key is gone: the lease ran out
		if n := rdb.Exists(bg, lockKey).Val(); n != 0 {
			t.Fatalf("%s: the wait for the lease ended with the lock key still there", story)
		}
		click(5)
		if ownerB := acquired("B"); ownerB == ownerA {
			t.Fatalf("%s: B's lock holds A's owner", story)
		}
		ownerB := redisGet(lockKey)
		click(6)
		click(7)
		click(8)
		switch story {
		case "v4", "v6":
			if s := redisGet(stockKey); s != "9" {
				t.Fatalf("%s: after A's write Redis holds stock %s, want 9", story, s)
			}
		case "v6-fence":
			fence := rdb.HGetAll(bg, stockKey+":fence:redis").Val()
			if s := redisGet(stockKey); s != "10" || fence["owner"] != ownerB || page(`document.querySelector("#lane-A li[data-mark=fix]")?.textContent || ""`) == "" {
				t.Fatalf("v6 fenced: after A's write Redis holds stock %s and the stock's newest holder %v (B is %s): want A's write refused, the stock 10, B newest, the refusal marked", s, fence, ownerB)
			}
		}
		click(9)
		switch story {
		case "v4":
			if n, b := rdb.Exists(bg, lockKey).Val(), laneState("B"); n != 0 || b != "stopped" || reply("A", "release", 0) != "1" {
				t.Fatalf("v4: after A's DEL (%s) the lock key exists %d times, B is %s: want B's lock deleted while B still works", reply("A", "release", 0), n, b)
			}
		case "v6", "v6-fence":
			if owner, b := redisGet(lockKey), laneState("B"); owner != ownerB || b != "stopped" || page(`String([...document.querySelectorAll("#lane-A li.step")].filter((li) => li.dataset.phase === "release").pop()?.querySelector(".reply").textContent)`) != "0" {
				t.Fatalf("%s: after A's release the lock key holds %q (B's: %q), B is %s: want A's release script answering 0 and B's lock kept", story, owner, ownerB, b)
			}
		}
		click(10)
		switch story {
		case "v4":
			verdict("violated", "B's lock deleted by A")
		case "v6":
			verdict("violated", "A's release answered 0: B's lock survived")
		case "v6-fence":
			verdict("ok", "A's write was refused by the stock")
			if s := redisGet(stockKey); s != "9" {
				t.Fatalf("v6 fenced: the story ended with stock %s, want 9: one unit sold once", s)
			}
		}
		shots(story)
	}
	if p := problems(); len(p) > 0 {
		t.Fatalf("the page reported errors: %v", p)
	}
}
