package history

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// RunID names one run (a load test's version, a scenario's cell): its
// requests' ids are RunID-N, so its sales can be told apart in a replica's
// history.
func RunID() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Fetch reads the sales of run (ids run-N) that the replica behind
// historyURL (its GET /history) recorded since since. A ring that dropped
// some of them since then is an error: the evidence would be incomplete.
func Fetch(ctx context.Context, client *http.Client, historyURL, adminToken string, since time.Time, run string) ([]Sale, error) {
	u := historyURL + "?since=" + url.QueryEscape(since.Format(time.RFC3339Nano))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	if adminToken != "" {
		req.Header.Set("Authorization", "Bearer "+adminToken)
	}
	res, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("history: GET %s: %w", u, err)
	}
	defer res.Body.Close()
	var reply Reply
	if err := json.NewDecoder(res.Body).Decode(&reply); err != nil || res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("history: GET %s: %s (%v; the replicas need -history > 0)", u, res.Status, err)
	}
	if reply.Truncated {
		return nil, fmt.Errorf("history: replica %s kept too few sales for this run (raise its -history)", reply.Replica)
	}
	var sales []Sale
	for _, s := range reply.Sales {
		if strings.HasPrefix(s.ID, run+"-") {
			sales = append(sales, s)
		}
	}
	return sales, nil
}
