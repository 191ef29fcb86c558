package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/locklab/locklab/internal/history"
)

// History reads the sales of run (ids run-N) that the replica c calls
// recorded since since (GET /history?since=). A ring that dropped some of
// them since then is an error: the evidence would be incomplete.
func (c *Client) History(ctx context.Context, since time.Time, run string) ([]history.Sale, error) {
	var reply history.Reply
	err := c.call(ctx, http.MethodGet, "history", url.Values{"since": {since.Format(time.RFC3339Nano)}}, nil, &reply)
	if err != nil {
		return nil, fmt.Errorf("%w (the replicas need -history > 0)", err)
	}
	if reply.Truncated {
		return nil, fmt.Errorf("client: replica %s kept too few sales for this run (raise its -history)", reply.Replica)
	}
	var sales []history.Sale
	for _, s := range reply.Sales {
		if strings.HasPrefix(s.ID, run+"-") {
			sales = append(sales, s)
		}
	}
	return sales, nil
}

// HistoryPage reads up to limit sales the replica c calls recorded after
// its sale numbered after (GET /history?after=&limit=): how the lab follows
// a run as it goes.
func (c *Client) HistoryPage(ctx context.Context, after uint64, limit int) (history.Reply, error) {
	var reply history.Reply
	q := url.Values{"after": {strconv.FormatUint(after, 10)}, "limit": {strconv.Itoa(limit)}}
	return reply, c.call(ctx, http.MethodGet, "history", q, nil, &reply)
}
