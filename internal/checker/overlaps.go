package checker

import (
	"slices"
	"time"

	"github.com/locklab/locklab/internal/history"
)

// twoHolders finds the pairs of sales of different owners whose holds of the
// lock overlapped (Overlaps' definition).
func twoHolders(sales []history.Sale) (int, []Overlap, int) {
	var held []history.Sale
	var ws []Window
	for _, s := range sales {
		if from, to, ok := s.Held(); ok {
			held, ws = append(held, s), append(ws, Window{Who: s.Owner, From: from, To: to})
		}
	}
	n, found := 0, []Overlap(nil)
	Overlaps(ws, func(i, j int) {
		n++
		if len(found) < named {
			a, b := ws[i], ws[j]
			found = append(found, Overlap{A: ref(held[i]), B: ref(held[j]), From: maxTime(a.From, b.From), To: minTime(a.To, b.To)})
		}
	})
	return n, found, len(held)
}

// Window is one holder's time inside the critical section: a hold of the
// lock by its owner, or, for a sale that took no lock, its own read to its
// write.
type Window struct {
	Who      string
	From, To time.Time
}

// Overlaps calls pair(i, j) for every pair of windows of different holders
// that overlapped, i's starting no later than j's (in start order): the one
// definition of two holders, which the checker counts, and the report's
// and the lab's timelines draw in red (Overlapping).
func Overlaps(ws []Window, pair func(i, j int)) {
	order := make([]int, len(ws))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return ws[a].From.Compare(ws[b].From) })
	for k, i := range order {
		for _, j := range order[k+1:] {
			if !ws[j].From.Before(ws[i].To) {
				break // in start order: no later window overlaps i
			}
			if ws[i].Who != ws[j].Who {
				pair(i, j)
			}
		}
	}
}

// Overlapping says of each window whether it overlapped another holder's
// (Overlaps).
func Overlapping(ws []Window) []bool {
	red := make([]bool, len(ws))
	Overlaps(ws, func(i, j int) { red[i], red[j] = true, true })
	return red
}
