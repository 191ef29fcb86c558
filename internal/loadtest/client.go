// The load test's side of the service: one sale sent and its reply tallied.
// Every call goes through internal/client; the runs (loadtest.go) only call
// these.

package loadtest

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/locklab/locklab/internal/api"
	"github.com/locklab/locklab/internal/checker"
	"github.com/locklab/locklab/internal/client"
)

// fire sends one request with the request id id, files its reply in tally,
// and returns it as the client saw it. A request whose ctx ends in flight is
// abandoned at once (its connection closed): its outcome is unknown.
func (cfg Config) fire(ctx context.Context, svc *client.Client, target, id string, tally *Result) checker.Op {
	method := http.MethodPost
	if cfg.Plain {
		method = http.MethodGet
	}
	op := checker.Op{ID: id, Invoke: time.Now()}
	r, err := svc.Send(ctx, method, target, id)
	op.Return = time.Now()
	if err != nil && !errors.As(err, new(*client.Error)) {
		tally.FailedBy["transport"]++
		tally.unknown++
		op.Outcome = api.Unknown
		return op
	}
	if r.Replica != "" {
		tally.Replicas[r.Replica]++
	}
	op.Outcome, op.Replica = r.Outcome(), r.Replica
	if cfg.Plain { // not a sale: any 200 is a request served
		op.Outcome = map[bool]string{true: api.Sold, false: api.Failed}[r.Status == http.StatusOK]
	}
	if r.Remaining != nil {
		op.Remaining = *r.Remaining
	}
	switch op.Outcome {
	case api.Sold:
		tally.Sold++
		if r.Warning != "" {
			tally.LeaseWarnings++
		}
	case api.SoldOut:
		tally.SoldOut++
	case api.Fenced:
		tally.Fenced++
	case api.Unknown:
		tally.unknown++
		tally.FailedBy[failedBy(r)]++
	default:
		tally.Failed++
		tally.FailedBy[failedBy(r)]++
	}
	return op
}

// failedBy is a failed reply's key in Result.FailedBy: its status and, when
// the reply names one, its code ("503 lock_timeout", "503 not_sent"): a
// replica that waited out its deadline and nginx that reached no replica
// both answer 503.
func failedBy(r client.Reply) string {
	if r.Code == "" {
		return strconv.Itoa(r.Status)
	}
	return strconv.Itoa(r.Status) + " " + r.Code
}

// Service is the client the run calls the service with: cfg.Client, or one
// made for cfg.URL and cfg.AdminToken (a plain run's URL may be any).
func (cfg Config) Service() (*client.Client, error) {
	switch {
	case cfg.Client != nil:
		return cfg.Client, nil
	case cfg.Plain:
		return client.New(cfg.URL, cfg.AdminToken), nil
	}
	return client.ForSale(cfg.URL, cfg.AdminToken)
}

// Health reads what the replica that answers says on /healthz: its keys and
// lock settings, what the figures were measured against.
func (cfg Config) Health(ctx context.Context) (api.Health, error) {
	svc, err := cfg.Service()
	if err != nil {
		return api.Health{}, err
	}
	return svc.Health(ctx)
}
