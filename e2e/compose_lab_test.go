//go:build e2e

package e2e

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// The lab of the Docker Compose stack, in a real browser through its nginx:
// deploy/compose-e2e.sh runs this with the stack up (LOCKLAB_COMPOSE_URL, and
// LOCKLAB_COMPOSE_TOKEN when the page asks for one); make test-e2e skips it.
// Every node of the stack shows up; v2 run from the page ends "violated" with
// red overlapping holds, v6 "ok" with none; v2's step-through tells its
// story (both read 10, both write 9); the page logs no error.
func TestComposeLab(t *testing.T) {
	url := os.Getenv("LOCKLAB_COMPOSE_URL")
	if url == "" {
		t.Skip("LOCKLAB_COMPOSE_URL is not set: deploy/compose-e2e.sh runs this against the Compose stack")
	}
	ctx, problems := browser(t)
	if err := navigate(ctx, url); err != nil {
		t.Fatalf("opening %s: %v", url, err)
	}
	// nginx, two replicas, three Redis nodes, three etcd members, three
	// ZooKeeper members, MariaDB.
	waitFor(t, ctx, "the Compose stack shown up", `document.querySelectorAll("#stack .node[data-state=up]").length === 13`)
	waitFor(t, ctx, "the versions listed", `document.querySelectorAll("input[name=lock]").length >= 10`)
	if token := os.Getenv("LOCKLAB_COMPOSE_TOKEN"); token != "" {
		waitFor(t, ctx, "the page asking for the token", `!document.querySelector("#token-field").hidden`)
		if err := chromedp.Do(ctx, chromedp.SendKeys("#token", token)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, ctx, "the nemesis offered only where there is a cluster to fault", `document.querySelector("#nemesis").disabled`)
	screenshot(t, ctx, "compose-lab-1-start")
	// Another site's page cannot sell or start a run through nginx or its
	// /replica/NAME/ routes (Compose publishes nothing else).
	otherSitesChangeNothing(t, stackUnderAttack{base: strings.TrimSuffix(url, "/")})
	v2ThenV6(t, ctx, "compose-lab")
	// v2's step-through on Compose's replicas, each reached by its own
	// route, the stock read through nginx.
	waitFor(t, ctx, "the run ended", `!document.querySelector("#start").disabled`)
	stepV2(stepPage{t, ctx}, func() string { return strconv.FormatInt(readStock(t, strings.TrimSuffix(url, "/")), 10) })
	if p := problems(); len(p) > 0 {
		t.Errorf("the page logged errors:\n%s", strings.Join(p, "\n"))
	}
}
