// Package history is what each replica remembers of its sales: one record a
// sale, with wall-clock times of every step that matters to the lock (lock
// obtained, stock read, stock written or refused, lock released), kept in a
// bounded ring and served to the checker. Recording costs no Redis round
// trip: the times are this process's clock. Replicas on one machine (or one
// Docker host) share one clock, so their records can be laid side by side.
package history

import (
	"sync"
	"time"

	"github.com/locklab/locklab/internal/sale"
)

// Sale is one sale as the replica saw it: the request, and the sale's own
// trace (owner, token, and the time of each step).
type Sale struct {
	// Seq numbers the replica's records in the order they were kept, from
	// 1: a reader that follows a run live asks for those after the last it
	// has (GET /history?after=SEQ).
	Seq        uint64    `json:"seq"`
	ID         string    `json:"id"` // the request id (X-Request-Id, or made up)
	Replica    string    `json:"replica"`
	Lock       string    `json:"lock"`
	Wait       string    `json:"wait,omitempty"`
	Start      time.Time `json:"start"` // the request arrived
	End        time.Time `json:"end"`   // the reply was ready
	Status     int       `json:"status"`
	Code       string    `json:"code,omitempty"`
	sale.Trace           // inlined: owner, token, obtained, read, written, refused, released, not_held
}

// Held reports whether the sale held the lock, and over which interval: the
// time its holder believed it held the lock, from the acquire's reply to
// sending its release (or, with no release recorded, the end of the
// request). A hand-off's claim that carried the sale's read (lease.Rider)
// counts from sending that round trip: the grant was the holder's already.
// For a correct lock two such intervals never overlap: the next
// grant is made only after the release reached Redis, and answered after
// that. Measured to the release's reply instead, they would overlap by up to
// one round trip for every lock.
func (s Sale) Held() (from, to time.Time, ok bool) {
	if s.Obtained.IsZero() {
		return time.Time{}, time.Time{}, false
	}
	to = s.Releasing
	if to.IsZero() {
		to = s.End
	}
	return s.Obtained, to, true
}

// Mark is an injected fault, as a scenario records it for the timeline:
// when, and what: Label in English, and as a reason's code and params
// (reason.Reason) for the lab's page, which says it in its reader's
// language.
type Mark struct {
	At     time.Time         `json:"at"`
	Label  string            `json:"label"`
	Code   string            `json:"code,omitempty"`
	Params map[string]string `json:"params,omitempty"`
}

// Reply is the reply to GET /history: one replica's sales since a time.
type Reply struct {
	Replica string `json:"replica"`
	// Truncated says that the ring had already dropped sales since then: a
	// larger -history is needed for a run this long.
	Truncated bool   `json:"truncated"`
	Sales     []Sale `json:"sales"`
	// Last is the highest Seq the replica has kept so far (0: none).
	Last uint64 `json:"last"`
}

// Ring keeps the last size sales, safe for concurrent use.
type Ring struct {
	mu    sync.Mutex
	sales []Sale
	next  int
	full  bool
	seq   uint64 // the last Seq handed out
}

// NewRing returns a ring of size sales (at least 1).
func NewRing(size int) *Ring { return &Ring{sales: make([]Sale, max(size, 1))} }

// Add records s, dropping the oldest when full.
func (r *Ring) Add(s Sale) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seq++
	s.Seq = r.seq
	r.sales[r.next] = s
	r.next = (r.next + 1) % len(r.sales)
	r.full = r.full || r.next == 0
}

// Since returns the sales that started at or after t, oldest first, and
// whether the ring had already dropped some sale that started at or after t
// (then the answer is incomplete).
func (r *Ring) Since(t time.Time) (sales []Sale, truncated bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n, first := r.next, 0
	if r.full {
		n, first = len(r.sales), r.next
	}
	for i := range n {
		s := r.sales[(first+i)%len(r.sales)]
		if !s.Start.Before(t) {
			sales = append(sales, s)
		}
	}
	// The oldest kept sale started after t, and the ring has wrapped: what
	// came between t and it is gone.
	truncated = r.full && n > 0 && r.sales[first].Start.After(t)
	return sales, truncated
}

// After returns the sales kept after the one numbered seq, oldest first (at
// most limit of them, limit > 0), whether the ring had already dropped some
// of them, and the last Seq handed out.
func (r *Ring) After(seq uint64, limit int) (sales []Sale, truncated bool, last uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n, first := r.next, 0
	if r.full {
		n, first = len(r.sales), r.next
	}
	oldest := r.seq - uint64(n) + 1 // the first kept Seq
	if seq+1 < oldest {
		truncated, seq = true, oldest-1
	}
	for i := int(seq + 1 - oldest); i < n && len(sales) < limit; i++ {
		sales = append(sales, r.sales[(first+i)%len(r.sales)])
	}
	return sales, truncated, r.seq
}

// Last is the last Seq handed out (0: nothing kept yet).
func (r *Ring) Last() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seq
}
