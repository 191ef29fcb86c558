//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// englishLeft lists the English sentences the page shows: each visible text
// node with three English words in a row (a command in capitals, SET NX EX,
// is not one), outside code, commands and replies (shown as they are in
// every language) and the language switch's own "English", and each label
// the timeline draws on its canvas (a fault's moment) with them. Each is
// listed with its element and its text.
const englishLeft = `(() => {
	const words = /\b[A-Za-z][a-z']*(?:[ ,]+[A-Za-z][a-z']*){2,}\b/;
	const out = [];
	const walk = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
	for (let n = walk.nextNode(); n; n = walk.nextNode()) {
		const e = n.parentElement;
		if (!e || e.closest("code, pre, kbd, samp, script, style, #lang") || !e.checkVisibility()) continue;
		const m = n.textContent.match(words);
		if (m) out.push(e.localName + (e.id ? "#" + e.id : e.className ? "." + String(e.className).split(" ")[0] : "") + ": " + JSON.stringify(m[0]) + " in " + JSON.stringify(n.textContent.trim().slice(0, 160)));
	}
	const tl = document.querySelector("#timeline");
	for (const l of tl && tl.checkVisibility() ? (tl.dataset.markLabels || "").split("\n") : []) {
		const m = l.match(words);
		if (m) out.push("a fault's mark on the timeline: " + JSON.stringify(m[0]) + " in " + JSON.stringify(l));
	}
	return out;
})()`

// englishIn fails t with each English sentence the page in ctx shows
// (englishLeft), saying where.
func englishIn(t *testing.T, ctx context.Context, where string) {
	t.Helper()
	left, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](englishLeft))
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Errorf("%s in 简体中文 still shows English:\n%s", where, strings.Join(left, "\n"))
	}
}

// checkChinese opens the lab in 简体中文 (?lang=zh) at 1280 and 390 px, in a
// browser of its own: the lessons view (v4's lesson, and v2's story stepped
// through to its verdict), the run view of runID, the stack view and the
// faults view show no English sentence (each one found is listed) and log
// no error, and two cells run from the faults view do not either
// (checkChineseCells); the first screen and a lesson are kept
// as screenshots; the choice holds across a reload without ?lang, and the
// switch takes the page back to English, which holds too. base is the
// lab's address through nginx, ending in "/".
func checkChinese(t *testing.T, base, runID string) {
	t.Helper()
	ctx, problems := browser(t)
	english := func(where string) {
		t.Helper()
		englishIn(t, ctx, where)
	}
	zh := `document.documentElement.lang === "zh-CN"`
	for _, width := range []int64{1280, 390} {
		if err := chromedp.Do(ctx, chromedp.EmulateViewport(width, 800)); err != nil {
			t.Fatal(err)
		}
		open := func(path, what, ready string) {
			t.Helper()
			if err := navigate(ctx, base+path); err != nil {
				t.Fatalf("opening /%s: %v", path, err)
			}
			waitFor(t, ctx, fmt.Sprintf("%s in 简体中文 at %d px", what, width), zh+" && "+ready)
		}
		open("?lang=zh", "the first screen", `document.querySelector("#lesson h3") && document.querySelector("#quick-run").textContent.includes("运行")`)
		screenshot(t, ctx, fmt.Sprintf("zh-start-%d", width))
		open("lab/lessons/v4?lang=zh", "v4's lesson", `document.querySelector("#lesson h3")?.textContent.startsWith("v4") && document.querySelector("#lesson pre.diff") !== null && document.querySelector("#steps-caption").textContent !== ""`)
		english(fmt.Sprintf("v4's lesson at %d px", width))
		screenshot(t, ctx, fmt.Sprintf("zh-lesson-v4-%d", width))
		open(fmt.Sprintf("lab/runs/%s?lang=zh", runID), "the run view", fmt.Sprintf(`document.body.dataset.view === "runs" && Number(document.querySelector("#timeline").dataset.holds) > 0 && document.querySelector(".verdict[data-lock]") !== null && document.querySelector("#run-status").textContent.includes(%q)`, runID))
		english(fmt.Sprintf("run %s's view at %d px", runID, width))
		screenshot(t, ctx, fmt.Sprintf("zh-run-%d", width))
		open("lab/stack?lang=zh", "the stack view", `document.body.dataset.view === "stack" && document.querySelectorAll("#stack .node[data-state=up]").length >= 3`)
		english(fmt.Sprintf("the stack view at %d px", width))
		open("lab/faults?lang=zh", "the faults view", `document.body.dataset.view === "faults" && document.querySelector("#matrix td[data-cell] .expect") !== null`)
		english(fmt.Sprintf("the faults view at %d px", width))
	}
	checkChineseCells(t, base)

	// v2's story, stepped through in 简体中文: its captions, its lanes and
	// its verdict.
	if err := navigate(ctx, base+"lab/lessons/v2?lang=zh#/lesson/v2"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "v2's story chosen", zh+` && document.querySelector("#steps-panel").dataset.preset === "v2" && !document.querySelector("#preset-next").hidden`)
	for i := 0; i < 8; i++ {
		done, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`!document.querySelector("#steps-verdict").hidden`))
		if err != nil {
			t.Fatal(err)
		}
		if done {
			break
		}
		at, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("#steps-panel").dataset.at + "/" + document.querySelector("#steps-panel").dataset.started`))
		if err := chromedp.Do(ctx, chromedp.Click("#preset-next", chromedp.NodeEnabled)); err != nil {
			t.Fatal(err)
		}
		waitFor(t, ctx, "v2's story's next step", fmt.Sprintf(`document.querySelector("#steps-panel").dataset.busy === "false" && (document.querySelector("#steps-panel").dataset.at + "/" + document.querySelector("#steps-panel").dataset.started) !== %q`, at))
		english(fmt.Sprintf("v2's story at its step %d", i))
	}
	waitFor(t, ctx, "v2's story's verdict in 简体中文", `document.querySelector("#steps-verdict").dataset.word === "violated" && document.querySelector("#steps-verdict").textContent.includes("卖了两次") && document.querySelector("#preset-next").textContent === "演示结束"`)
	english("v2's story at its end")
	screenshot(t, ctx, "zh-story-v2")

	// The choice is remembered: no ?lang, still 简体中文; the switch back
	// to English holds as well.
	if err := navigate(ctx, base+"lab/lessons/v4"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "简体中文 remembered across a reload", zh+` && document.querySelector("#lessons-title").textContent.startsWith("课程") && document.querySelector('#lang button[data-lang="zh"]').getAttribute("aria-pressed") === "true"`)
	// The switch loads the page again: wait for the new page (the old one's
	// mark gone) before asking it anything, the old one's context gone with it.
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.__beforeSwitch = true`)); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Click(`#lang button[data-lang="en"]`, chromedp.NodeVisible)); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); ; {
		reloaded, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.__beforeSwitch === undefined && document.readyState === "complete"`))
		if err == nil && reloaded {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the switch to English did not load the page again: %v", err)
		}
		time.Sleep(100 * time.Millisecond) // polling the page's state, as waitFor does
	}
	waitFor(t, ctx, "English from the switch", `document.documentElement.lang === "en" && location.search === "?lang=en" && document.querySelector("#lessons-title").textContent.startsWith("Lessons")`)
	if err := navigate(ctx, base+"lab/lessons/v4"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "English remembered across a reload", `document.documentElement.lang === "en" && document.querySelector("#lessons-title").textContent.startsWith("Lessons") && document.querySelector("#lesson h3")?.textContent.startsWith("v4")`)

	if p := problems(); len(p) > 0 {
		t.Errorf("the lab in 简体中文 logged errors:\n%s", strings.Join(p, "\n"))
	}
}

// checkChineseRun opens run id's view in 简体中文 at 1280 px, in a browser of
// its own, and lists any English it shows: its verdicts with their reasons,
// and its faults' moments on the timeline (a run under the nemesis).
func checkChineseRun(t *testing.T, base, id string) {
	t.Helper()
	ctx, problems := browser(t)
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 800)); err != nil {
		t.Fatal(err)
	}
	if err := navigate(ctx, base+"lab/runs/"+id+"?lang=zh"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "run "+id+"'s view in 简体中文", `document.documentElement.lang === "zh-CN" && document.body.dataset.view === "runs" && Number(document.querySelector("#timeline").dataset.holds) > 0 && document.querySelector(".verdict[data-lock]") !== null`)
	englishIn(t, ctx, "run "+id+"'s view")
	screenshot(t, ctx, "zh-run-"+id)
	if p := problems(); len(p) > 0 {
		t.Errorf("run %s's view in 简体中文 logged errors:\n%s", id, strings.Join(p, "\n"))
	}
}

// checkChineseCells runs two cells from the faults view in 简体中文, in a
// browser of its own at 1280 px: lost-lease for v7 (its verdict, its
// fault's moment drawn on the timeline) and failover-sentinel for v6,
// which cannot run on this cluster (no Sentinel, no fault proxies: its why,
// and the why inside it); each shows no English sentence. Another page
// open on the lab shows each cell too, as the lab's feed tells it.
func checkChineseCells(t *testing.T, base string) {
	t.Helper()
	ctx, problems := browser(t)
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 800)); err != nil {
		t.Fatal(err)
	}
	if err := navigate(ctx, base+"lab/faults?lang=zh"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the faults view in 简体中文", `document.documentElement.lang === "zh-CN" && document.body.dataset.view === "faults" && document.querySelector("#matrix td[data-cell] button") !== null`)
	for _, c := range []struct{ cell, said string }{
		{"lost-lease/v7", `Number(document.querySelector("#timeline").dataset.marks) >= 1 && document.querySelector("#timeline").dataset.markLabels.includes("锁的 key 消失了")`},
		{"failover-sentinel/v6", `document.querySelector('.verdict[data-cell="failover-sentinel/v6"] .word').textContent === "无法运行" && document.querySelector('.verdict[data-cell="failover-sentinel/v6"]').textContent.includes("无法运行：它需要")`},
	} {
		if err := chromedp.Do(ctx, chromedp.Click(fmt.Sprintf(`#matrix td[data-cell=%q] button`, c.cell), chromedp.NodeEnabled)); err != nil {
			t.Fatalf("running %s from the faults view: %v", c.cell, err)
		}
		waitFor(t, ctx, c.cell+"'s verdict in 简体中文", fmt.Sprintf(`document.querySelector('.verdict[data-cell=%q]') !== null && !document.querySelector("#start").disabled && %s`, c.cell, c.said))
		englishIn(t, ctx, c.cell+"'s cell in the faults view")
		screenshot(t, ctx, "zh-cell-"+strings.ReplaceAll(c.cell, "/", "-"))
	}

	if p := problems(); len(p) > 0 {
		t.Errorf("the faults view in 简体中文 logged errors:\n%s", strings.Join(p, "\n"))
	}
}
