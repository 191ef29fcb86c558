package checker

import (
	"slices"
	"time"

	"github.com/locklab/locklab/internal/api"
	"github.com/locklab/locklab/internal/reason"
)

// decide answers the same question as porcupine's search with the counter
// model, exactly, in O(n log n), for histories too long for the search:
// minutes of faults leave hundreds of unknown outcomes, each of which may
// take effect at any time after its invoke, and porcupine's search grows
// with their combinations.
//
// It can, because this counter only goes down, one unit at a time, and a
// sold reply says where it left the stock: the sale that reported r left must
// be the step from r+1 to r. So the steps from before down to after are in a
// known order; each step is taken by the sale that reported it or, where no
// sale did, by an unknown outcome; and the steps' points in time must rise
// and fall inside their requests' intervals. Taking every step as early as
// its request allows (an unknown: the one invoked first, as all of them may
// end at any time) leaves the most room for every later step, so if that
// fails, every order fails. A sold-out reply needs every step behind it; the
// read after the run needs exactly before-after steps.
//
// ops are resolved (see resolve): sold, sold out and unknown take part;
// failed and fenced changed nothing. It returns no reason (its Text "")
// when an order exists, and otherwise why none does, naming a request.
func decide(before, after int64, ops []Op) reason.Reason {
	steps := before - after
	if steps < 0 {
		return reason.New("stockGrew", "the stock grew from {a} to {b}", "a", before, "b", after)
	}
	if steps > 0 && after < 0 {
		return reason.New("belowZero", "the stock went from {a} to {b}, below 0", "a", before, "b", after)
	}
	// bySteps[k] is the sold request that took step k+1 (before-k to before-k-1).
	bySteps := make([]*Op, steps)
	var unknown, soldOut []Op
	for i := range ops {
		op := &ops[i]
		switch op.Outcome {
		case api.Sold:
			k := before - op.Remaining - 1
			if k < 0 || k >= steps {
				return reason.New("reportedOutside", "request {id} reported {n} left, but the stock went from {a} to {b}", "id", op.ID, "n", op.Remaining, "a", before, "b", after)
			}
			if other := bySteps[k]; other != nil {
				return reason.New("bothReported", "requests {a} and {b} both reported {n} left", "a", other.ID, "b", op.ID, "n", op.Remaining)
			}
			bySteps[k] = op
		case api.Unknown:
			unknown = append(unknown, *op)
		case api.SoldOut:
			soldOut = append(soldOut, *op)
		}
	}
	slices.SortFunc(unknown, func(a, b Op) int { return a.Invoke.Compare(b.Invoke) })
	var at time.Time // when the last step was taken, as early as possible
	for k, op := range bySteps {
		if op == nil {
			if len(unknown) == 0 {
				return reason.New("noneLeft", "the stock went from {a} to {b}, but no request can have left {n}", "a", before, "b", after, "n", before-int64(k)-1)
			}
			at, unknown = later(at, unknown[0].Invoke), unknown[1:]
			continue
		}
		if at = later(at, op.Invoke); at.After(op.Return) {
			return reason.New("tooEarly", "request {id} reported {n} left at {at}, before the stock can have come down to {m}",
				"id", op.ID, "n", op.Remaining, "at", op.Return.Format(time.RFC3339Nano), "m", op.Remaining+1)
		}
	}
	for _, op := range soldOut {
		if after > 0 || (steps > 0 && at.After(op.Return)) {
			return reason.New("soldOutEarly", "request {id} answered sold out at {at}, when the stock cannot have been 0 yet", "id", op.ID, "at", op.Return.Format(time.RFC3339Nano))
		}
	}
	return reason.Reason{}
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
