package etcd

import (
	"context"
	"slices"

	"github.com/locklab/locklab/internal/chaos"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// ahead is a Watcher for the mutex's waiter that tells it of its
// predecessor's deletion as soon as etcd has it. concurrency.Mutex's waiter
// reads the queue at revision R, where the key before its own exists, and
// watches that key from R for its deletion. etcd serves a watch that starts
// at a revision it has already passed as history: the watcher is "unsynced"
// and caught up by a loop that runs every 100 ms, so the deletion was told
// up to 100 ms late, one hand-over in several at two to eight waiters (the
// bench's etcd row sold 41-53 holds/s at c=4 against 113-173 at 1 and 16).
//
// So ahead watches from R+1: the deletion is later than R, so nothing is
// missed, and when etcd is still at R the watch is live at once. When etcd
// has moved on by the time the watch begins (its creation's revision is
// past R: another waiter joined, another hold ended), ahead reads the key:
// gone, the waiter is told of its deletion now; still there at revision G,
// ahead watches again from G+1, up to aheadTries times. The recipe reads
// the queue again after any deletion, so a wake-up that came early costs
// it one read, never the lock.
type ahead struct {
	clientv3.Watcher
	kv clientv3.KV
}

// aheadTries bounds ahead's new watches for one wait: past it, the last
// watch stays, caught up by etcd's loop.
const aheadTries = 3

func (a ahead) Watch(ctx context.Context, key string, opts ...clientv3.OpOption) clientv3.WatchChan {
	rev := clientv3.OpGet(key, opts...).Rev()
	if rev <= 0 {
		return a.Watcher.Watch(ctx, key, opts...)
	}
	out := make(chan clientv3.WatchResponse)
	send := func(wr clientv3.WatchResponse) bool {
		select {
		case out <- wr:
			return true
		case <-ctx.Done():
			return false
		}
	}
	go func() {
		defer close(out)
		for try := 1; ; try++ {
			wctx, cancel := context.WithCancel(ctx)
			wch := a.Watcher.Watch(wctx, key, append(opts, clientv3.WithRev(rev+1), clientv3.WithCreatedNotify())...)
			again := false
			for wr := range wch {
				if wr.Created && wr.Header.Revision > rev && try < aheadTries {
					got, err := a.kv.Get(ctx, key, clientv3.WithCountOnly())
					if err == nil && got.Count == 0 {
						gone := &clientv3.Event{Type: clientv3.EventTypeDelete, Kv: &mvccpb.KeyValue{Key: []byte(key), ModRevision: got.Header.Revision}}
						wr = clientv3.WatchResponse{Header: got.Header, Events: []*clientv3.Event{gone}}
					} else if err == nil {
						rev, again = got.Header.Revision, true
						break
					}
				}
				if !send(wr) {
					break
				}
			}
			cancel()
			if !again {
				return
			}
		}
	}()
	return out
}

// deaf is a Watcher that loses the wake-up of a waiter whose request
// switched it off (chaos.Off.Wake, make mutations' lost-wakeup): its watch
// is the real one, with every deletion taken out of what it delivers. A
// waiter of the mutex watches the key just before its own and is woken only
// by that key's deletion, so it waits, with the lock free, until its
// deadline. Every other watch passes through.
type deaf struct{ clientv3.Watcher }

func (d deaf) Watch(ctx context.Context, key string, opts ...clientv3.OpOption) clientv3.WatchChan {
	wch := d.Watcher.Watch(ctx, key, opts...)
	if !chaos.From(ctx).Off.Wake {
		return wch
	}
	out := make(chan clientv3.WatchResponse)
	go func() {
		defer close(out)
		for wr := range wch {
			wr.Events = slices.DeleteFunc(wr.Events, func(ev *clientv3.Event) bool { return ev.Type == clientv3.EventTypeDelete })
			if len(wr.Events) == 0 && wr.Err() == nil && !wr.Canceled {
				continue // a deletion, or a progress notice: nothing to tell
			}
			select {
			case out <- wr:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}
