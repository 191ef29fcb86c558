package scenario

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/locklab/locklab/internal/checker"
	"github.com/locklab/locklab/internal/loadtest"
	"github.com/locklab/locklab/internal/reason"
)

// NemesisRow is one version's run under the nemesis, judged: the load
// test's table row, and the lab's verdict.
type NemesisRow struct {
	Lock   string `json:"lock"`
	Wait   string `json:"wait,omitempty"` // how v3-v8 waited (-wait); empty: the replicas' own
	Fenced bool   `json:"fenced"`
	Seed   uint64 `json:"seed"`
	// Faults counts the schedule's faults that hit a process this run's
	// sales used (scenario.Env.Uses), not the whole schedule.
	Faults   int `json:"faults"`
	Requests int `json:"requests"`
	Sold     int `json:"sold"`
	Refused  int `json:"fenced_refused"`
	Failed   int `json:"failed"` // sold nothing, known
	Unknown  int `json:"unknown"`
	// NotServed is Failed + Unknown: requests the run got no answer to
	// that says what the stock did.
	NotServed int `json:"not_served"`
	checker.Verdict
	// HistoryNote says why the replicas' history was not read, or why
	// what was read is incomplete (a replica killed mid-run lost it): then
	// HistoryChecked is false, and two holders and lost updates show "-".
	HistoryNote string `json:"history_note,omitempty"`
	// NotTested lists why the run cannot pass (no history, nothing sold,
	// under half the requests served, no fault on its processes): a run
	// with any fails the nemesis's exit status.
	NotTested []string `json:"not_tested,omitempty"`
	// Violation says the stock was harmed: a lost update, an oversell, or
	// a history no counter could give. FirstAfter is when, after the start,
	// the first lost update's later write landed (0: none, or only the
	// counter's check saw it).
	Violation  bool    `json:"violation"`
	FirstAfter float64 `json:"first_violation_after_s,omitempty"`
}

// Label names the run as the load test does: "v6 handoff".
func (r NemesisRow) Label() string { return strings.TrimSpace(r.Lock + " " + r.Wait) }

// Used are the processes res's sales used: its lock's servers, the stock's
// node, and the replicas that served it.
func (e Env) Used(res loadtest.Result) []string {
	return slices.DeleteFunc(e.Uses(res.Lock), func(p string) bool {
		return e.isReplica(p) && res.Replicas[p] == 0
	})
}

func (e Env) isReplica(name string) bool {
	return name == e.Replicas[0].Name || name == e.Replicas[1].Name
}

// JudgeNemesis sums one version's run under the nemesis up: a violation is a lost update, an
// oversell (even at its lowest), or a history no counter could give; its
// faults are those of the schedule that hit a process it used (procs). The run is not tested
// when its history was not read or is incomplete (a replica that served it
// was killed: its history went with it), when it sold nothing, when under
// half its requests were served, or when no fault touched it.
func JudgeNemesis(res loadtest.Result, fenced bool, seed uint64, faults []Fault, procs []string, start time.Time) NemesisRow {
	r := NemesisRow{Lock: res.Lock, Wait: res.Wait, Fenced: fenced, Seed: seed, Faults: Touching(faults, procs), Requests: res.Requests,
		Sold: res.Sold, Refused: res.Fenced, Failed: res.Failed, Unknown: res.Verdict.Unknown, NotServed: res.NotServed(),
		Verdict: res.Verdict, HistoryNote: res.HistoryNote}
	r.Reasons = slices.Clone(r.Reasons) // its own added below, res's left as they are
	r.Violation = res.LostUpdates > 0 || res.OversoldMin > 0 || res.Linearizability == "violated"
	if killed := KilledReplicas(faults, served(res)); r.HistoryChecked && len(killed) > 0 {
		var which []string
		for _, f := range killed {
			which = append(which, fmt.Sprintf("%s at %.1f s", f.Target, f.At.Seconds()))
		}
		r.HistoryChecked = false
		r.Because(&r.HistoryNote, reason.New("historyIncomplete", "the replicas' history is incomplete: killed ({which}), a replica comes back with none of the sales it served before",
			"which", strings.Join(which, ", ")))
	}
	// Each why it is not tested, listed among its reasons too.
	skip := func(why reason.Reason) {
		var text string
		r.Because(&text, why)
		r.NotTested = append(r.NotTested, text)
	}
	if !r.HistoryChecked {
		if r.HistoryNote != "" {
			r.NotTested = append(r.NotTested, r.HistoryNote) // its reason already listed
		} else {
			skip(reason.New("historyNotReadAtAll", "the replicas' history was not read"))
		}
	}
	if r.Sold == 0 {
		skip(reason.New("nothingSold", "nothing sold"))
	} else if n := r.Requests - r.NotServed; 2*n < r.Requests {
		skip(reason.New("underHalfServed", "{n} of {of} requests served (under half)", "n", n, "of", r.Requests))
	}
	if r.Faults == 0 {
		skip(reason.New("noFaultHit", "no fault hit a process it used"))
	}
	written := map[string]time.Time{}
	for _, s := range res.Sales {
		if s.Status == 200 {
			written[s.ID] = s.Written.At
		}
	}
	var first time.Time
	for _, p := range res.Lost { // the later write of each pair is the lost one
		w := later(written[p.A.ID], written[p.B.ID])
		if !w.IsZero() && (first.IsZero() || w.Before(first)) {
			first = w
		}
	}
	if !first.IsZero() {
		r.FirstAfter = first.Sub(start).Seconds()
	}
	return r
}

// served are the replicas that answered some of res's requests.
func served(res loadtest.Result) []string {
	var names []string
	for name, n := range res.Replicas {
		if n > 0 {
			names = append(names, name)
		}
	}
	return names
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
