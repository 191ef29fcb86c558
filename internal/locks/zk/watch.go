package zk

import (
	"context"
	"errors"

	"github.com/go-zookeeper/zk"
)

// What the scenarios need to watch and reset the zk lock from outside, as
// they watch a Redis lock's key: here, beside the recipe, so that nobody
// else knows where its nodes are. A directory not made yet holds nothing.

// Held reports whether key's lock has a node: a holder's, or a waiter's
// behind it.
func Held(ctx context.Context, s *Session, key string) (bool, error) {
	children, err := call(ctx, "", func() ([]string, error) {
		c, _, err := s.conn.Children(New(s, Options{Key: key}).dir)
		return c, err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return false, nil
	}
	return len(order(children)) > 0, err
}

// Clear deletes every node of key's lock (other sessions' too): the lock is
// free and nobody queued.
func Clear(ctx context.Context, s *Session, key string) error {
	dir := New(s, Options{Key: key}).dir
	children, err := call(ctx, "", func() ([]string, error) {
		c, _, err := s.conn.Children(dir)
		return c, err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, c := range children {
		_, err := call(ctx, "", func() (struct{}, error) { return struct{}{}, s.conn.Delete(dir+"/"+c, -1) })
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			return err
		}
	}
	return nil
}
