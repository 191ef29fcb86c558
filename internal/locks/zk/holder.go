package zk

import (
	"errors"
	"slices"
	"strings"

	"github.com/go-zookeeper/zk"
)

// Holder is who holds the lock now, as the ensemble says (the lab's lessons
// show it between two stepped sales): the first node of the lock's
// directory, by sequence, and the owner its holder wrote in it. ok is false
// when nobody holds it. The node is ephemeral: it has no lease of its own,
// it goes when its session expires.
func (l *Locker) Holder() (node, owner string, ok bool, err error) {
	children, _, err := l.s.conn.Children(l.dir)
	if errors.Is(err, zk.ErrNoNode) || err == nil && len(children) == 0 {
		return "", "", false, nil
	}
	if err != nil {
		return "", "", false, err
	}
	seq := func(c string) string { return c[strings.LastIndex(c, "-lock-")+1:] }
	first := slices.MinFunc(children, func(a, b string) int { return strings.Compare(seq(a), seq(b)) })
	data, _, err := l.s.conn.Get(l.dir + "/" + first)
	if errors.Is(err, zk.ErrNoNode) { // gone between the two reads
		return "", "", false, nil
	}
	if err != nil {
		return "", "", false, err
	}
	return first, string(data), true, nil
}
