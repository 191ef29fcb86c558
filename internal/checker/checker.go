// Package checker judges one load test run from its evidence, not from one
// number: the client's history of every request (invoke, return, outcome)
// and the replicas' history of every sale (who held the lock when, what each
// read and wrote). It finds two holders at once, lost updates, and whether
// the stock behaved as one counter (linearizability, checked by porcupine and,
// when its search runs out of time, by decide),
// and gives the oversell as a range when some outcomes are unknown. Every
// violation names the sales involved.
package checker

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/locklab/locklab/internal/api"
	"github.com/locklab/locklab/internal/history"
	"github.com/locklab/locklab/internal/reason"
)

// Op is one request as the client saw it.
type Op struct {
	ID      string    `json:"id"`
	Invoke  time.Time `json:"invoke"`
	Return  time.Time `json:"return"`
	Outcome string    `json:"outcome"` // api.Sold, api.SoldOut, api.Fenced, api.Failed, api.Unknown
	// Remaining is the stock a sold reply reported.
	Remaining int64  `json:"remaining,omitempty"`
	Replica   string `json:"replica,omitempty"`
}

// Run is one version's evidence.
type Run struct {
	StockBefore, StockAfter int64
	Ops                     []Op
	// Sales are the replicas' records; nil when their history could not be
	// read (then only the client-side checks run).
	Sales []history.Sale
}

// Verdict is what the checker found.
type Verdict struct {
	// TwoHolders counts pairs of sales of different owners whose holds of
	// the lock overlapped; Overlaps names the first few.
	TwoHolders int       `json:"two_holders"`
	Overlaps   []Overlap `json:"overlaps,omitempty"`
	// Holds counts the sales that held a lock: none for a version with no
	// lock, whose two holders mean nothing.
	Holds int `json:"holds"`
	// LostUpdates counts sold sales that read a value another sold sale had
	// read; Lost names the first few.
	LostUpdates int    `json:"lost_updates"`
	Lost        []Pair `json:"lost,omitempty"`
	// Linearizable: there is an order of the requests, within their real
	// times, in which a counter gives every reply seen and, after them all,
	// the stock read at the end, and at least one request sold (Judged > 0).
	// Linearizability says OK, Violated, or NotTested when no request can
	// have taken effect (none at all; every one failed, fenced or sold out;
	// unknown ones that the replicas' history does not show selling): a
	// run that sold nothing proves nothing about the lock, so it must never
	// read as a pass. As in Jepsen's composition, violated outranks not
	// tested, which outranks ok: a stock that changed with nothing sold is
	// still violated. Untested says why not tested. LinearizabilityBy says what decided:
	// "porcupine" (its search), "counter" (when the search ran out of time:
	// the exact check for this one model, see decide) or "count" (more units
	// sold than the stock lost: no order can give the final read).
	// NotLinearizable says why not, naming a request.
	Linearizable      bool   `json:"linearizable"`
	Linearizability   string `json:"linearizability"`
	LinearizabilityBy string `json:"linearizability_by,omitempty"`
	NotLinearizable   string `json:"not_linearizable,omitempty"`
	Untested          string `json:"untested,omitempty"`
	// Reasons are the verdict's sentences (NotLinearizable, Untested; and
	// the load test's and the nemesis's own, added by them) as codes with
	// their params: the lab's page says them in its reader's language.
	Reasons []reason.Reason `json:"reasons,omitempty"`
	// Judged counts the requests whose effect the check placed: those that
	// sold, by their reply or by their replica's record of an unknown one.
	Judged  int `json:"judged"`
	Unknown int `json:"unknown"`
	// OversoldMin and OversoldMax bound sold - taken: each unknown outcome
	// may or may not have taken a unit.
	OversoldMin int64 `json:"oversold_min"`
	OversoldMax int64 `json:"oversold_max"`
	// HistoryChecked says the replicas' records were read (two holders and
	// lost updates come from them).
	HistoryChecked bool `json:"history_checked"`
}

// Overlap is two sales that held the lock at once.
type Overlap struct {
	A    Ref       `json:"a"`
	B    Ref       `json:"b"`
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
}

// Pair is two sold sales that read the same stock value.
type Pair struct {
	A    Ref   `json:"a"`
	B    Ref   `json:"b"`
	Read int64 `json:"read"`
}

// The words of Verdict.Linearizability.
const (
	OK        = "ok"
	Violated  = "violated"
	NotTested = "not tested"
)

// Ref names a sale.
type Ref struct {
	ID      string `json:"id"`
	Replica string `json:"replica"`
	Owner   string `json:"owner,omitempty"`
}

func ref(s history.Sale) Ref { return Ref{ID: s.ID, Replica: s.Replica, Owner: s.Owner} }

// named is how many violations of each kind a verdict names.
const named = 10

// searchTimeout bounds porcupine's search in one run; decide answers after it.
const searchTimeout = 10 * time.Second

// Check judges r.
func Check(r Run) Verdict {
	v := Verdict{HistoryChecked: r.Sales != nil}
	sold := 0
	for _, op := range r.Ops {
		switch op.Outcome {
		case api.Sold:
			sold++
		case api.Unknown:
			v.Unknown++
		}
	}
	taken := r.StockBefore - r.StockAfter
	v.OversoldMin = max(0, int64(sold)-taken)
	v.OversoldMax = min(int64(sold), int64(sold)-taken+min(int64(v.Unknown), max(taken, 0)))
	v.TwoHolders, v.Overlaps, v.Holds = twoHolders(r.Sales)
	v.LostUpdates, v.Lost = lostUpdates(r.Sales)
	if v.OversoldMin > 0 {
		v.Linearizability, v.LinearizabilityBy = Violated, "count"
		v.Because(&v.NotLinearizable, reason.New("soldButDown", "{sold} sold, but the stock went down by {by}", "sold", sold, "by", taken))
		return v
	}
	ops := resolve(r.Ops, r.Sales)
	for _, op := range ops {
		if op.Outcome == api.Sold {
			v.Judged++
		}
	}
	if v.Judged == 0 {
		// Nothing to order: only whether the stock and the sold-out replies
		// could be what they are with no sale (decide, exact and quick).
		if v.Because(&v.NotLinearizable, decide(r.StockBefore, r.StockAfter, ops)) {
			v.Linearizability, v.LinearizabilityBy = Violated, "counter"
		} else {
			v.Linearizability = NotTested
			v.Because(&v.Untested, untested(r.Ops))
		}
		return v
	}
	v.LinearizabilityBy = "porcupine"
	switch porcupine.CheckOperationsTimeout(counter(r.StockBefore), operations(ops, r.StockAfter), searchTimeout) {
	case porcupine.Ok:
		v.Linearizable, v.Linearizability = true, OK
		return v
	case porcupine.Illegal:
		v.Linearizability = Violated
	default: // the search ran out of time
		v.LinearizabilityBy = "counter"
	}
	// Why it is not (porcupine says only that), or whether, when the search
	// ran out.
	v.Because(&v.NotLinearizable, decide(r.StockBefore, r.StockAfter, ops))
	if v.Linearizability == Violated && v.NotLinearizable == "" {
		// Never seen; TestDecideAgreesWithPorcupine looks for it.
		v.Because(&v.NotLinearizable, reason.New("checkersDisagree", "porcupine found no order, the counter check found one: a bug in one of them"))
	}
	if v.Linearizability == "" {
		v.Linearizable = v.NotLinearizable == ""
		v.Linearizability = map[bool]string{true: OK, false: Violated}[v.Linearizable]
	}
	return v
}

// untested says why no request can have taken effect: none in the client's
// history (a scenario cell judges the replicas' records only), or their
// outcomes ("1000 requests: 1000 failed").
func untested(ops []Op) reason.Reason {
	if len(ops) == 0 {
		return reason.New("noRequests", "no requests in the client's history")
	}
	by := map[string]int{}
	for _, op := range ops {
		by[op.Outcome]++
	}
	var parts []string
	for _, o := range slices.Sorted(maps.Keys(by)) {
		parts = append(parts, fmt.Sprintf("%d %s", by[o], strings.ReplaceAll(o, "_", " ")))
	}
	return reason.New("noneSold", "no request sold ({n} requests: {parts})", "n", len(ops), "parts", strings.Join(parts, ", "))
}

// Because sets field (the verdict's, or the run's that embeds it) to r's
// text and lists r among the verdict's reasons; it says whether there was
// one (a reason with no text is none).
func (v *Verdict) Because(field *string, r reason.Reason) bool {
	if r.Text == "" {
		return false
	}
	*field = r.Text
	v.Reasons = append(v.Reasons, r)
	return true
}

// lostUpdates finds the sold sales that read a value another sold sale read.
func lostUpdates(sales []history.Sale) (int, []Pair) {
	byRead := map[int64][]history.Sale{}
	for _, s := range sales {
		if s.Code == "" && !s.Written.At.IsZero() {
			byRead[s.Read.Value] = append(byRead[s.Read.Value], s)
		}
	}
	n, found := 0, []Pair(nil)
	for _, read := range slices.Sorted(maps.Keys(byRead)) {
		group := byRead[read]
		for _, s := range group[1:] {
			n++
			if len(found) < named {
				found = append(found, Pair{A: ref(group[0]), B: ref(s), Read: read})
			}
		}
	}
	return n, found
}

// output is what one request saw.
type output struct {
	outcome   string
	remaining int64
}

// counter is the model: the stock, starting at before. A sale is one
// decrement that must leave what the reply said; sold out needs 0; an
// unknown outcome may have decremented or not.
func counter(before int64) porcupine.Model {
	m := porcupine.NondeterministicModel{
		Init: func() []any { return []any{before} },
		Step: func(state, _, out any) []any {
			s, o := state.(int64), out.(output)
			switch o.outcome {
			case api.Sold:
				if s > 0 && o.remaining == s-1 {
					return []any{s - 1}
				}
			case api.SoldOut:
				if s <= 0 {
					return []any{s}
				}
			case api.Unknown:
				if s > 0 {
					return []any{s, s - 1}
				}
				return []any{s}
			case final:
				if s == o.remaining {
					return []any{s}
				}
			}
			return nil
		},
		DescribeOperation: func(_, out any) string {
			o := out.(output)
			if o.outcome == api.Sold {
				return "sold, " + strconv.FormatInt(o.remaining, 10) + " left"
			}
			return o.outcome
		},
	}
	return m.ToModel()
}

// resolve gives the requests whose outcome the client could not know (a
// reply lost, a 502 or 504 from nginx) the outcome their replica recorded,
// where it recorded one: a sale that wrote is sold, leaving what it wrote,
// and took effect by the time of its write (which may be after the client
// gave up: a frozen replica resumes); a sale that finished without writing
// (refused, failed) changed nothing, unless its own write's reply was lost
// (indeterminate). The rest stay unknown. The counts of
// the verdict stay the client's; only the search uses this, and it needs
// it: each unknown request may take effect at any time after its invoke,
// and a few hundred of them (minutes of faults) make the search time out.
func resolve(ops []Op, sales []history.Sale) []Op {
	if len(sales) == 0 {
		return ops
	}
	byID := make(map[string]history.Sale, len(sales))
	for _, s := range sales {
		byID[s.ID] = s
	}
	out := slices.Clone(ops)
	for i, op := range out {
		s, ok := byID[op.ID]
		if op.Outcome != api.Unknown || !ok || s.End.IsZero() || s.Code == api.CodeIndeterminate {
			continue // the replica does not know either: its write's reply was lost
		}
		if s.Written.At.IsZero() {
			out[i].Outcome = api.Failed
			continue
		}
		out[i].Outcome, out[i].Remaining = api.Sold, s.Written.Value
		if s.Written.At.After(op.Return) {
			out[i].Return = s.Written.At
		}
	}
	return out
}

// final is the outcome of the stock's read after the run: it must find what
// the counter holds.
const final = "final read"

// operations are the requests that may have changed the stock, in
// porcupine's terms, and the stock read after them all (after): a failed or
// fenced request changed nothing and is left out; an unknown one may take
// effect at any time after its invoke.
func operations(ops []Op, after int64) []porcupine.Operation {
	var out []porcupine.Operation
	last := int64(0)
	for i, op := range ops {
		last = max(last, op.Return.UnixNano())
		if op.Outcome == api.Failed || op.Outcome == api.Fenced {
			continue
		}
		ret := op.Return.UnixNano()
		if op.Outcome == api.Unknown {
			ret = 1<<63 - 1
		}
		out = append(out, porcupine.Operation{ClientId: i, Call: op.Invoke.UnixNano(), Return: ret,
			Output: output{outcome: op.Outcome, remaining: op.Remaining}})
	}
	return append(out, porcupine.Operation{ClientId: len(ops), Call: last + 1, Return: last + 2,
		Output: output{outcome: final, remaining: after}})
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
