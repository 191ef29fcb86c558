package scenario

import (
	"context"
	"errors"
	"fmt"
	"slices"
)

// What a fault leaves behind when it cannot be undone (NotUndone.Left).
const (
	LeftFrozen       = "frozen"       // SIGSTOP sent, SIGCONT failed
	LeftDown         = "down"         // killed, not started again
	LeftCutOff       = "cut off"      // a fault proxy still drops its bytes
	LeftDelayed      = "delayed"      // a fault proxy still delays them
	LeftDisconnected = "disconnected" // a fault proxy still disabled
	LeftClockAhead   = "clock ahead"  // a node's clock not reset
	LeftFailedOver   = "failed over"  // the standby still primary
)

// NotUndone is a fault a scenario (or the nemesis) injected and could not
// take back: the node it left changed, how, and why. Everything else a
// scenario does heals itself; this is what a person must fix by hand, so it
// travels as a type (errors.As, NotUndoneIn) and the lab can say how.
type NotUndone struct {
	Node string // the process, or the fault proxy (REPLICA>NODE)
	Left string // one of the Left constants
	Err  error
}

func (n *NotUndone) Error() string {
	return fmt.Sprintf("%s left %s: %v", n.Node, n.Left, n.Err)
}

func (n *NotUndone) Unwrap() error { return n.Err }

// notUndone is err as a NotUndone of node, or nil.
func notUndone(node, left string, err error) error {
	if err == nil {
		return nil
	}
	return &NotUndone{Node: node, Left: left, Err: err}
}

// restarted wraps a Kill's restart so that its failure names the node left
// down.
func restarted(node string, restart func(context.Context) error) func(context.Context) error {
	return func(ctx context.Context) error { return notUndone(node, LeftDown, restart(ctx)) }
}

// NotUndoneIn lists the faults err says were not undone, outermost first,
// each node and state once (errors.Join may carry the same one twice: a heal
// that runs once reports its error to each caller).
func NotUndoneIn(err error) []*NotUndone {
	var found []*NotUndone
	var walk func(error)
	walk = func(err error) {
		switch e := err.(type) {
		case nil:
		case *NotUndone:
			if !slices.ContainsFunc(found, func(n *NotUndone) bool { return n.Node == e.Node && n.Left == e.Left }) {
				found = append(found, e)
			}
		case interface{ Unwrap() []error }:
			for _, err := range e.Unwrap() {
				walk(err)
			}
		case interface{ Unwrap() error }:
			walk(e.Unwrap())
		}
	}
	walk(err)
	return found
}

// also is errors.Join(err, more) unless err already holds more: an undo
// that runs once returns the same error to the deferred call that the
// scenario already returned.
func also(err, more error) error {
	if more == nil || errors.Is(err, more) {
		return err
	}
	return errors.Join(err, more)
}
