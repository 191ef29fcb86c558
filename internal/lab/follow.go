package lab

import (
	"context"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/locklab/locklab/internal/history"
)

// follower reads a running version's sales from every replica's history as
// they are kept (GET /history?after=SEQ, a page at a time), for the live
// timeline. What it misses (a replica that did not answer a tick) the load
// test's own reading at the end makes up.
type follower struct {
	l    *Lab
	run  string // the load test's run id: its sales' ids are run-N
	lock string

	mu    sync.Mutex
	found []Hold
	stopF context.CancelFunc
	done  chan struct{}
}

func newFollower(l *Lab, run, lock string) *follower {
	return &follower{l: l, run: run, lock: lock, done: make(chan struct{})}
}

// start notes where each replica's history stands now, then follows it.
func (f *follower) start(ctx context.Context) {
	ctx, f.stopF = context.WithCancel(ctx)
	after := map[string]uint64{}
	for _, name := range f.l.found.find(ctx) {
		if reply, err := f.page(ctx, name, math.MaxInt64); err == nil {
			after[name] = reply.Last
		}
	}
	go func() {
		defer close(f.done)
		tick := time.NewTicker(f.l.cfg.Tick)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			// A replica found since the start (scaled up) is read from
			// its first sale on: only the run's own sales are kept.
			for _, name := range f.l.found.find(ctx) {
				f.follow(ctx, name, after)
			}
		}
	}()
}

// follow reads replica name's sales after after[name], page by page.
func (f *follower) follow(ctx context.Context, name string, after map[string]uint64) {
	for {
		reply, err := f.page(ctx, name, after[name])
		if err != nil {
			return // the next tick tries again; the end of the run reads all
		}
		var holds []Hold
		for _, s := range reply.Sales {
			after[name] = max(after[name], s.Seq)
			if strings.HasPrefix(s.ID, f.run+"-") {
				if h, ok := holdOf(f.lock, s); ok {
					holds = append(holds, h)
				}
			}
		}
		f.mu.Lock()
		f.found = append(f.found, holds...)
		f.mu.Unlock()
		if len(reply.Sales) < historyPage {
			return
		}
	}
}

// historyPage is how many sales one read asks for.
const historyPage = 2000

func (f *follower) page(ctx context.Context, replica string, after uint64) (history.Reply, error) {
	svc, err := f.l.service()
	if err != nil {
		return history.Reply{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second) // a replica that hangs: the next tick tries again
	defer cancel()
	return svc.Replica(replica).HistoryPage(ctx, after, historyPage)
}

// take hands over what was found since the last take.
func (f *follower) take() []Hold {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.found
	f.found = nil
	return out
}

func (f *follower) stop() {
	f.stopF()
	<-f.done
}
