package scenario

import (
	"context"
	"strings"
)

// fire sends n sales of lock at once and returns their replies.
func (e Env) fire(ctx context.Context, lock string, n int) []reply {
	chans := make([]<-chan reply, n)
	for i := range chans {
		chans[i] = e.sell(ctx, lock, "")
	}
	replies := make([]reply, n)
	for i, ch := range chans {
		replies[i] = <-ch
	}
	return replies
}

// fenceHook is the /sale hook that turns fencing on or off for one sale.
func fenceHook(fenced bool) string {
	if fenced {
		return "fence=1"
	}
	return "fence=0"
}

// infoField is field's value in a reply of Redis's INFO ("" when absent).
func infoField(info, field string) string {
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	return ""
}
