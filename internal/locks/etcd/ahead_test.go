package etcd

import (
	"context"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/etcdtest"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// ahead starts a watch from R at R+1: the waiter's key, put at R, is not told
// again (a plain watch from R would tell it), and its deletion is told
// whether it came before the watch began (caught up from history) or after.
func TestAheadStartsPastTheRevisionRead(t *testing.T) {
	cli := etcdtest.Start(t, 1).Client()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	w := ahead{cli.Watcher}
	for _, deleteFirst := range []bool{true, false} {
		put, err := cli.Put(ctx, "k", "v")
		if err != nil {
			t.Fatal(err)
		}
		r := put.Header.Revision
		if deleteFirst {
			if _, err := cli.Delete(ctx, "k"); err != nil {
				t.Fatal(err)
			}
		}
		wctx, stop := context.WithCancel(ctx)
		wch := w.Watch(wctx, "k", clientv3.WithRev(r), clientv3.WithCreatedNotify())
		if !deleteFirst {
			if wr := <-wch; !wr.Created {
				t.Fatalf("first response %+v, want the watch's creation", wr)
			}
			if _, err := cli.Delete(ctx, "k"); err != nil {
				t.Fatal(err)
			}
		}
		got := func() *clientv3.Event {
			for wr := range wch {
				if err := wr.Err(); err != nil {
					t.Fatal(err)
				}
				if len(wr.Events) > 0 {
					return wr.Events[0]
				}
			}
			t.Fatal("the watch ended with no event")
			return nil
		}()
		stop()
		if got.Type != mvccpb.DELETE || got.Kv.ModRevision != r+1 {
			t.Fatalf("delete first %v: first event %v at %d, want the deletion at %d (the put at %d not told again)", deleteFirst, got.Type, got.Kv.ModRevision, r+1, r)
		}
	}
}
