package history

import (
	"testing"
	"time"

	"github.com/locklab/locklab/internal/sale"
)

func TestRing(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC)
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Second) }
	r := NewRing(3)
	for i := range 2 {
		r.Add(Sale{ID: string(rune('a' + i)), Start: at(i)})
	}
	if got, trunc := r.Since(at(0)); len(got) != 2 || got[0].ID != "a" || trunc {
		t.Fatalf("not full: %v, truncated %v", got, trunc)
	}
	for i := 2; i < 5; i++ {
		r.Add(Sale{ID: string(rune('a' + i)), Start: at(i)})
	}
	got, trunc := r.Since(at(0))
	if len(got) != 3 || got[0].ID != "c" || got[2].ID != "e" || !trunc {
		t.Fatalf("wrapped: %v, truncated %v; want c d e, truncated", got, trunc)
	}
	if got, trunc := r.Since(at(3)); len(got) != 2 || got[0].ID != "d" || trunc {
		t.Fatalf("since d: %v, truncated %v; want d e, complete", got, trunc)
	}
}

func TestHeld(t *testing.T) {
	t0 := time.Now()
	if _, _, ok := (Sale{Start: t0, End: t0}).Held(); ok {
		t.Fatal("a sale that never obtained the lock held it")
	}
	from, to, ok := Sale{Trace: sale.Trace{Obtained: t0}, End: t0.Add(time.Second)}.Held()
	if !ok || !from.Equal(t0) || !to.Equal(t0.Add(time.Second)) {
		t.Fatalf("no release recorded: held %v-%v %v; want until the end", from, to, ok)
	}
}

// After follows a ring live: what came after a Seq, in order, in pages of
// at most limit, and says when the ring dropped some of it.
func TestRingAfter(t *testing.T) {
	r := NewRing(3)
	if got, trunc, last := r.After(0, 10); len(got) != 0 || trunc || last != 0 {
		t.Fatalf("empty: %v %v %d", got, trunc, last)
	}
	for i := range 2 {
		r.Add(Sale{ID: string(rune('a' + i))})
	}
	if got, trunc, last := r.After(0, 10); len(got) != 2 || got[0].Seq != 1 || got[1].ID != "b" || trunc || last != 2 {
		t.Fatalf("after 0: %v %v %d; want a(1) b(2)", got, trunc, last)
	}
	if got, _, _ := r.After(1, 10); len(got) != 1 || got[0].ID != "b" {
		t.Fatalf("after 1: %v; want b", got)
	}
	if got, _, _ := r.After(2, 10); len(got) != 0 {
		t.Fatalf("after 2: %v; want none", got)
	}
	for i := 2; i < 5; i++ { // c d e: a and b dropped
		r.Add(Sale{ID: string(rune('a' + i))})
	}
	got, trunc, last := r.After(0, 10)
	if len(got) != 3 || got[0].ID != "c" || got[0].Seq != 3 || !trunc || last != 5 {
		t.Fatalf("wrapped, after 0: %v %v %d; want c d e, truncated, last 5", got, trunc, last)
	}
	if got, trunc, _ := r.After(2, 2); len(got) != 2 || got[1].ID != "d" || trunc {
		t.Fatalf("after 2, limit 2: %v %v; want c d, complete", got, trunc)
	}
	if got, trunc, _ := r.After(4, 10); len(got) != 1 || got[0].ID != "e" || trunc {
		t.Fatalf("after 4: %v %v; want e", got, trunc)
	}
}
