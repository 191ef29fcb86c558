package zk

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-zookeeper/zk"

	"github.com/locklab/locklab/internal/api"
)

// Queue reads the lock as ZooKeeper holds it, for the lab's store panel:
// the directory's sequential nodes in the order they were made (the first
// holds, each later one watches the one before it), each with its data (the
// sale's owner, written at its create), the session that owns the ephemeral
// node and its creation zxid. A node gone between the listing and its read
// (released, or its session ended) is left out. No directory yet: nobody
// ever took the lock. The client's requests take no context: ctx bounds
// each (call), and must carry a deadline, since a request is sent again for
// as long as no member is reachable.
func (l *Locker) Queue(ctx context.Context) ([]api.QueueEntry, error) {
	children, err := call(ctx, "", func() ([]string, error) {
		c, _, err := l.s.conn.Children(l.dir)
		return c, err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("zk: list %s: %w", l.dir, err)
	}
	type read struct {
		data []byte
		stat *zk.Stat
	}
	var out []api.QueueEntry
	for _, name := range order(children) {
		node := l.dir + "/" + name
		r, err := call(ctx, "", func() (read, error) {
			data, stat, err := l.s.conn.Get(node)
			return read{data, stat}, err
		})
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("zk: read %s: %w", node, err)
		}
		out = append(out, api.QueueEntry{Key: node, Holds: len(out) == 0, Owner: string(r.data),
			Session: fmt.Sprintf("%x", r.stat.EphemeralOwner), Revision: r.stat.Czxid})
	}
	return out, nil
}
