package etcd

import (
	"context"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Holder is who holds the lock now, as etcd says (the lab's lessons show it
// between two stepped sales): the first key under the mutex's prefix, by
// create revision, and the time its lease has left (whole seconds, as etcd
// counts it). ok is false when nobody holds it.
func (l *Locker) Holder(ctx context.Context) (key string, left time.Duration, ok bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, RequestTimeout)
	defer cancel()
	resp, err := l.cli.Get(ctx, l.prefix, clientv3.WithFirstCreate()...)
	if err != nil || len(resp.Kvs) == 0 {
		return "", 0, false, err
	}
	kv := resp.Kvs[0]
	ttl, err := l.cli.TimeToLive(ctx, clientv3.LeaseID(kv.Lease))
	if err != nil {
		return "", 0, false, err
	}
	if ttl.TTL < 0 { // expired between the two reads: its key goes with it
		return string(kv.Key), 0, true, nil
	}
	return string(kv.Key), time.Duration(ttl.TTL) * time.Second, true, nil
}
