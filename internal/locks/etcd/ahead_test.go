package etcd

import (
	"context"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/etcdtest"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// ahead tells the waiter of the key's deletion, and of nothing before it,
// in each order of events around the watch's start: the deletion before
// the watch (told from the key's absence), after it, and after another
// write that moved etcd on before the watch began (watched again from the
// key's read). The key's own put, at the revision the waiter read, is never
// told (a plain watch from that revision would tell it).
func TestAheadTellsTheDeletionInEveryOrder(t *testing.T) {
	cli := etcdtest.Start(t, 1).Client()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	w := ahead{cli.Watcher, cli.KV}
	for _, order := range []string{"delete, watch", "watch, delete", "other write, watch, delete"} {
		put, err := cli.Put(ctx, "k", "v")
		if err != nil {
			t.Fatal(err)
		}
		r := put.Header.Revision
		del := func() int64 {
			d, err := cli.Delete(ctx, "k")
			if err != nil || d.Deleted != 1 {
				t.Fatalf("%s: delete: %v %+v", order, err, d)
			}
			return d.Header.Revision
		}
		var deleted int64
		switch order {
		case "delete, watch":
			deleted = del()
		case "other write, watch, delete":
			if _, err := cli.Put(ctx, "other", "v"); err != nil {
				t.Fatal(err)
			}
		}
		wctx, stop := context.WithCancel(ctx)
		wch := w.Watch(wctx, "k", clientv3.WithRev(r))
		var got *clientv3.Event
		for wr := range wch {
			if err := wr.Err(); err != nil {
				t.Fatal(err)
			}
			if wr.Created && deleted == 0 {
				deleted = del() // the watch is live: now the deletion
			}
			if len(wr.Events) > 0 {
				got = wr.Events[0]
				break
			}
		}
		stop()
		if got == nil || got.Type != mvccpb.DELETE || string(got.Kv.Key) != "k" || got.Kv.ModRevision < deleted {
			t.Fatalf("%s: first event %v, want k's deletion (at %d; its put at %d not told)", order, got, deleted, r)
		}
	}
}
