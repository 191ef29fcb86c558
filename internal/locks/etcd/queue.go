package etcd

import (
	"context"
	"fmt"

	"github.com/locklab/locklab/internal/api"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Queue reads the lock as etcd holds it, for the lab's store panel: every
// key under the mutex's prefix, oldest first (concurrency.Mutex: the oldest
// holds, each later one waits for the one before it), each with its create
// revision and what is left of its lease. A key is the prefix and its
// session's lease id, so the lease names the waiter the page stepped. One
// read of the keys, then one of each lease (etcd keeps TTLs apart from
// keys), each bounded by RequestTimeout (the key read by the locker's
// bounded KV): with no quorum etcd never answers.
func (l *Locker) Queue(ctx context.Context) ([]api.QueueEntry, error) {
	resp, err := l.cli.Get(ctx, l.prefix, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil {
		return nil, fmt.Errorf("etcd: read the keys under %s: %w", l.prefix, err)
	}
	out := make([]api.QueueEntry, 0, len(resp.Kvs))
	for i, kv := range resp.Kvs {
		e := api.QueueEntry{Key: string(kv.Key), Holds: i == 0, Revision: kv.CreateRevision}
		if kv.Lease != 0 {
			e.Lease = fmt.Sprintf("%x", kv.Lease)
			lctx, cancel := context.WithTimeout(ctx, RequestTimeout)
			ttl, err := l.cli.TimeToLive(lctx, clientv3.LeaseID(kv.Lease))
			cancel()
			if err != nil {
				return nil, fmt.Errorf("etcd: read the lease %x of %s: %w", kv.Lease, kv.Key, err)
			}
			ms := max(ttl.TTL, 0) * 1000 // whole seconds; -1: expired, its key going with it
			e.PTTLms = &ms
		}
		out = append(out, e)
	}
	return out, nil
}
