package checker

import (
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/locklab/locklab/internal/api"
	"github.com/locklab/locklab/internal/history"
	"github.com/locklab/locklab/internal/sale"
)

var t0 = time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC)

func ms(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }

// held is a sold sale by owner that held the lock from..to and read read.
func held(id, owner string, from, to int, read int64) history.Sale {
	return history.Sale{ID: id, Replica: "r-" + id, Start: ms(from), End: ms(to), Status: 200,
		Trace: sale.Trace{Owner: owner, Obtained: ms(from), Releasing: ms(to), Released: ms(to + 1),
			Read: sale.Step{At: ms(from), Value: read}, Written: sale.Step{At: ms(to), Value: read - 1}}}
}

func TestTwoHolders(t *testing.T) {
	for name, tc := range map[string]struct {
		sales []history.Sale
		want  int
	}{
		"overlap":          {[]history.Sale{held("a", "A", 0, 10, 10), held("b", "B", 5, 15, 9)}, 1},
		"one after other":  {[]history.Sale{held("a", "A", 0, 10, 10), held("b", "B", 10, 15, 9)}, 0},
		"same owner":       {[]history.Sale{held("a", "A", 0, 10, 10), held("b", "A", 5, 15, 9)}, 0},
		"three at once":    {[]history.Sale{held("a", "A", 0, 10, 10), held("b", "B", 1, 9, 9), held("c", "C", 2, 8, 8)}, 3},
		"never obtained":   {[]history.Sale{held("a", "A", 0, 10, 10), {ID: "b", Start: ms(2), End: ms(4)}}, 0},
		"no release known": {[]history.Sale{held("a", "A", 0, 10, 10), {ID: "b", Replica: "r-b", Start: ms(2), End: ms(12), Trace: sale.Trace{Owner: "B", Obtained: ms(9)}}}, 1},
	} {
		t.Run(name, func(t *testing.T) {
			v := Check(Run{Sales: tc.sales})
			if v.TwoHolders != tc.want {
				t.Fatalf("two holders %d, want %d (%+v)", v.TwoHolders, tc.want, v.Overlaps)
			}
			if tc.want > 0 && (len(v.Overlaps) == 0 || v.Overlaps[0].A.ID == "" || v.Overlaps[0].B.Replica == "") {
				t.Fatalf("the overlap is not named: %+v", v.Overlaps)
			}
		})
	}
}

func TestLostUpdates(t *testing.T) {
	refused := held("c", "C", 20, 30, 10)
	refused.Code, refused.Written = api.CodeFenced, sale.Step{}
	for name, tc := range map[string]struct {
		sales []history.Sale
		want  int
	}{
		"same read":        {[]history.Sale{held("a", "A", 0, 10, 10), held("b", "B", 20, 30, 10)}, 1},
		"in turn":          {[]history.Sale{held("a", "A", 0, 10, 10), held("b", "B", 20, 30, 9)}, 0},
		"refused sale":     {[]history.Sale{held("a", "A", 0, 10, 10), refused}, 0},
		"three, one value": {[]history.Sale{held("a", "A", 0, 10, 10), held("b", "B", 20, 30, 10), held("d", "D", 40, 50, 10)}, 2},
	} {
		t.Run(name, func(t *testing.T) {
			v := Check(Run{Sales: tc.sales})
			if v.LostUpdates != tc.want {
				t.Fatalf("lost updates %d, want %d", v.LostUpdates, tc.want)
			}
			if tc.want > 0 && v.Lost[0].Read != 10 {
				t.Fatalf("the lost update is not named with its value: %+v", v.Lost)
			}
		})
	}
}

// op is a request invoked at from and returned at to (ms).
func op(from, to int, outcome string, remaining int64) Op {
	return Op{Invoke: ms(from), Return: ms(to), Outcome: outcome, Remaining: remaining}
}

func TestLinearizable(t *testing.T) {
	for name, tc := range map[string]struct {
		before, after int64 // the stock before the requests, and read after them all
		ops           []Op
		want          string
	}{
		"in turn":                {10, 8, []Op{op(0, 1, api.Sold, 9), op(2, 3, api.Sold, 8)}, "ok"},
		"overlapping, any way":   {10, 8, []Op{op(0, 5, api.Sold, 8), op(1, 6, api.Sold, 9)}, "ok"},
		"one unit twice":         {10, 8, []Op{op(0, 5, api.Sold, 9), op(1, 6, api.Sold, 9)}, "violated"},
		"against real time":      {10, 8, []Op{op(0, 1, api.Sold, 8), op(2, 3, api.Sold, 9)}, "violated"},
		"sold out too soon":      {1, 0, []Op{op(0, 1, api.SoldOut, 0), op(2, 3, api.Sold, 0)}, "violated"},
		"failed changes nothing": {10, 8, []Op{op(0, 1, api.Sold, 9), op(2, 3, api.Failed, 0), op(4, 5, api.Sold, 8)}, "ok"},
		// An unknown outcome may have sold or not, at any time after its invoke.
		"unknown did sell":         {10, 8, []Op{op(0, 1, api.Unknown, 0), op(2, 3, api.Sold, 8)}, "ok"},
		"unknown did not sell":     {10, 9, []Op{op(0, 1, api.Unknown, 0), op(2, 3, api.Sold, 9)}, "ok"},
		"unknown sold later":       {10, 7, []Op{op(0, 1, api.Unknown, 0), op(2, 3, api.Sold, 9), op(4, 5, api.Sold, 7)}, "ok"},
		"unknown is one sale only": {10, 7, []Op{op(0, 1, api.Unknown, 0), op(2, 3, api.Sold, 7)}, "violated"},
		// The stock read after the run is an observation too.
		"a unit gone unsold":    {10, 7, []Op{op(0, 1, api.Sold, 9), op(2, 3, api.Sold, 8)}, "violated"},
		"unknown took the unit": {10, 7, []Op{op(0, 1, api.Sold, 9), op(2, 3, api.Sold, 8), op(4, 5, api.Unknown, 0)}, "ok"},
		// More sold than the stock lost: decided by the count, no search.
		"more sold than taken": {10, 9, []Op{op(0, 5, api.Sold, 9), op(1, 6, api.Sold, 9)}, "violated"},
	} {
		t.Run(name, func(t *testing.T) {
			v := Check(Run{StockBefore: tc.before, StockAfter: tc.after, Ops: tc.ops})
			if v.Linearizability != tc.want || v.Linearizable != (tc.want == "ok") {
				t.Fatalf("linearizability %q (%v), want %q", v.Linearizability, v.Linearizable, tc.want)
			}
			if (v.NotLinearizable == "") != v.Linearizable {
				t.Fatalf("linearizability %q, but why not: %q", v.Linearizability, v.NotLinearizable)
			}
			if why := decide(tc.before, tc.after, tc.ops).Text; (why == "") != (tc.want == "ok") {
				t.Fatalf("decide says %q, want %s", why, tc.want)
			}
		})
	}
}

// An unknown outcome the replica recorded is that outcome for the search:
// "one unit twice" through an unknown reply is found; a sale that never
// wrote took nothing; one whose own write's reply was lost stays unknown.
func TestUnknownResolvedByHistory(t *testing.T) {
	rec := func(id string, written int64, at int, code string) history.Sale {
		s := history.Sale{ID: id, End: ms(at), Code: code}
		if code == "" {
			s.Written = sale.Step{At: ms(at), Value: written}
		}
		return s
	}
	unknown := func(id string, from, to int) Op {
		o := op(from, to, api.Unknown, 0)
		o.ID = id
		return o
	}
	for name, tc := range map[string]struct {
		after int64
		ops   []Op
		sales []history.Sale
		want  string
	}{
		// Without the record, the unknown may have taken the unit after the
		// other sale: no violation to be seen.
		"one unit twice, hidden": {8, []Op{unknown("a", 0, 1), op(2, 3, api.Sold, 9)}, nil, "ok"},
		// Its replica says it wrote 9, as the other did, and its write came
		// after the client gave up (a frozen replica).
		"one unit twice, seen": {8, []Op{unknown("a", 0, 1), op(2, 3, api.Sold, 9)}, []history.Sale{rec("a", 9, 4, "")}, "violated"},
		"never wrote":          {9, []Op{unknown("a", 0, 1), op(2, 3, api.Sold, 9)}, []history.Sale{rec("a", 0, 1, api.CodeLockTimeout)}, "ok"},
		"its reply lost too":   {8, []Op{unknown("a", 0, 1), op(2, 3, api.Sold, 9)}, []history.Sale{rec("a", 0, 1, api.CodeIndeterminate)}, "ok"},
	} {
		t.Run(name, func(t *testing.T) {
			v := Check(Run{StockBefore: 10, StockAfter: tc.after, Ops: tc.ops, Sales: tc.sales})
			if v.Linearizability != tc.want {
				t.Fatalf("linearizability %q, want %q", v.Linearizability, tc.want)
			}
		})
	}
}

// The oversell is a range when outcomes are unknown: each may have taken a
// unit or not.
func TestOversoldRange(t *testing.T) {
	for name, tc := range map[string]struct {
		before, after int64
		ops           []Op
		min, max      int64
	}{
		"exact":           {10, 8, []Op{op(0, 1, api.Sold, 9), op(2, 3, api.Sold, 8)}, 0, 0},
		"one unit twice":  {10, 9, []Op{op(0, 5, api.Sold, 9), op(1, 6, api.Sold, 9)}, 1, 1},
		"unknown":         {10, 8, []Op{op(0, 1, api.Sold, 9), op(0, 1, api.Sold, 8), op(0, 1, api.Sold, 8), op(2, 3, api.Unknown, 0)}, 1, 2},
		"unknown took it": {10, 9, []Op{op(0, 1, api.Unknown, 0)}, 0, 0},
	} {
		t.Run(name, func(t *testing.T) {
			v := Check(Run{StockBefore: tc.before, StockAfter: tc.after, Ops: tc.ops})
			if v.OversoldMin != tc.min || v.OversoldMax != tc.max {
				t.Fatalf("oversold [%d, %d], want [%d, %d]", v.OversoldMin, v.OversoldMax, tc.min, tc.max)
			}
		})
	}
}

// decide gives porcupine's answer, on every history of a few requests drawn
// at random: from a real counter's run with some replies changed or lost,
// and from nothing at all.
func TestDecideAgreesWithPorcupine(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	counts := map[bool]int{}
	for i := range 20000 {
		before := int64(rng.IntN(5))
		var ops []Op
		after := before
		if i%2 == 0 { // a counter's run: each request takes effect at a point inside it
			s := before
			for p := range 1 + rng.IntN(7) {
				from := p*3 - rng.IntN(6)
				o := op(from, p*3+rng.IntN(6), api.SoldOut, 0)
				if s > 0 && rng.IntN(4) > 0 {
					s--
					o.Outcome, o.Remaining = api.Sold, s
				}
				switch rng.IntN(8) {
				case 0:
					o.Outcome = api.Unknown
				case 1:
					o.Remaining += int64(rng.IntN(3) - 1)
				case 2:
					o.Outcome = api.Failed
				}
				ops = append(ops, o)
			}
			after = s + int64(rng.IntN(5)/4)
		} else {
			outcomes := []string{api.Sold, api.SoldOut, api.Unknown, api.Failed}
			for range 1 + rng.IntN(6) {
				from := rng.IntN(20)
				ops = append(ops, op(from, from+rng.IntN(10), outcomes[rng.IntN(4)], int64(rng.IntN(int(before)+2)-1)))
			}
			after = before - int64(rng.IntN(4))
		}
		for j := range ops {
			ops[j].ID = strconv.Itoa(j)
		}
		want := porcupine.CheckOperations(counter(before), operations(ops, after))
		why := decide(before, after, ops).Text
		if want != (why == "") {
			t.Fatalf("history %d (stock %d, then %d): porcupine says linearizable %v, decide says %q\n%+v", i, before, after, want, why, ops)
		}
		counts[want]++
	}
	if counts[true] < 1000 || counts[false] < 1000 {
		t.Fatalf("too few of one answer to compare: %v", counts)
	}
}

// A nemesis-sized history: 10,000 sales in turn, 2 % of them unknown.
func BenchmarkDecide(b *testing.B) {
	const n = 10000
	ops := make([]Op, n)
	for i := range ops {
		ops[i] = op(i*2, i*2+3, api.Sold, int64(n-1-i))
		if i%50 == 0 {
			ops[i].Outcome = api.Unknown
		}
	}
	for b.Loop() {
		if why := decide(n, 0, ops).Text; why != "" {
			b.Fatal(why)
		}
	}
}

// A run in which no request can have taken effect tested nothing: it is
// "not tested", never "ok" (and never ""), and says how many it judged. The
// old Check said OK to each of these but the first, and "" to that one.
// A stock that changed with nothing sold is still violated: violated
// outranks not tested.
func TestNothingToJudgeIsNotTested(t *testing.T) {
	many := func(outcome string) []Op {
		ops := make([]Op, 1000)
		for i := range ops {
			ops[i] = op(i, i+1, outcome, 0)
			ops[i].ID = strconv.Itoa(i)
		}
		return ops
	}
	for name, tc := range map[string]struct {
		before, after int64
		ops           []Op
		sales         []history.Sale
		want          string
		judged        int
	}{
		"no requests":      {100, 100, nil, nil, NotTested, 0},
		"all failed":       {100, 100, many(api.Failed), nil, NotTested, 0},
		"all fenced":       {100, 100, many(api.Fenced), nil, NotTested, 0},
		"all sold out":     {0, 0, many(api.SoldOut), nil, NotTested, 0},
		"all unknown":      {100, 100, many(api.Unknown), nil, NotTested, 0},
		"unknown, 50 gone": {100, 50, many(api.Unknown), nil, NotTested, 0},
		// The replicas' history shows an unknown one sold: judged.
		"unknown, one resolved": {100, 99, many(api.Unknown), []history.Sale{{ID: "7", Replica: "r", Start: ms(7), End: ms(8),
			Trace: sale.Trace{Written: sale.Step{At: ms(7), Value: 99}}}}, OK, 1},
		"failed, stock gone":    {100, 90, many(api.Failed), nil, Violated, 0},
		"sold out, stock there": {100, 100, many(api.SoldOut), nil, Violated, 0},
		"one sold among failed": {100, 99, append(many(api.Failed), op(2000, 2001, api.Sold, 99)), nil, OK, 1},
	} {
		t.Run(name, func(t *testing.T) {
			v := Check(Run{StockBefore: tc.before, StockAfter: tc.after, Ops: tc.ops, Sales: tc.sales})
			if v.Linearizability != tc.want || v.Judged != tc.judged || v.Linearizable != (tc.want == OK) {
				t.Fatalf("linearizability %q (%v), judged %d; want %q, judged %d (%s)", v.Linearizability, v.Linearizable, v.Judged, tc.want, tc.judged, v.NotLinearizable)
			}
			if (v.Untested != "") != (tc.want == NotTested) {
				t.Fatalf("linearizability %q, untested %q", v.Linearizability, v.Untested)
			}
		})
	}
}
