package scenario

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/locklab/locklab/internal/api"
	"github.com/locklab/locklab/internal/client"
)

// reply is one sale's answer.
type reply struct {
	status                 int
	code, warning, outcome string
	elapsed                time.Duration
	err                    error
}

// String is the reply as the details print it: "200", "503 lock_timeout".
func (r reply) String() string { return strings.TrimSpace(fmt.Sprint(r.status, " ", r.code)) }

// sell sends POST /sale?lock=LOCK&HOOKS through nginx with the admin token,
// in the background.
func (e Env) sell(ctx context.Context, lock, hooks string) <-chan reply {
	return e.sellAt(ctx, e.URL, lock, hooks)
}

// sellAt is sell to the given /sale endpoint.
func (e Env) sellAt(ctx context.Context, saleURL, lock, hooks string) <-chan reply {
	ch := make(chan reply, 1)
	go func() {
		var r reply
		defer func() { ch <- r }()
		if e.off != "" {
			hooks += "&off=" + e.off
		}
		var id string
		if e.seq != nil {
			id = e.cell + "-" + strconv.FormatInt(e.seq.Add(1), 10)
		}
		start := time.Now()
		res, err := e.at(saleURL).Sale(ctx, client.Query{Lock: lock, Hooks: strings.Trim(hooks, "&")}, id)
		if err != nil && !errors.As(err, new(*client.Error)) {
			r.err = fmt.Errorf("scenario: %w", err)
			return
		}
		r.elapsed = time.Since(start)
		r.status, r.code, r.warning, r.outcome = res.Status, res.Code, res.Warning, res.Outcome()
		if res.Status == http.StatusBadRequest || res.Status == http.StatusUnauthorized {
			r.err = fmt.Errorf("scenario: the service refused the fault hook (%d %s): start it with -chaos and the same -admin-token", res.Status, res.Error)
		}
	}()
	return ch
}

// lockAfterFirst waits for the first sale's reply, then looks at once whether
// the lock (the second sale's, by then) still exists: a release that deleted
// its successor's lock leaves none. Then it waits for the second sale.
func (e Env) lockAfterFirst(ctx context.Context, first, second <-chan reply) (reply, int64, reply, error) {
	r1 := <-first
	if r1.err != nil {
		<-second
		return r1, 0, reply{}, r1.err
	}
	locked, err := e.locked(ctx)
	held := map[bool]int64{true: 1}[locked]
	r2 := <-second
	if err == nil {
		err = r2.err
	}
	return r1, held, r2, err
}

// verdict is Oversell or NoOversell for the replies, with their detail; an
// error when a request failed.
func (e Env) verdict(ctx context.Context, before int64, rs ...reply) (string, string, error) {
	for _, r := range rs {
		if r.err != nil {
			return "", "", r.err
		}
	}
	oversold, detail, err := e.oversold(ctx, before, rs...)
	if err != nil || oversold == 0 {
		return NoOversell, detail, err
	}
	return Oversell, detail, nil
}

// oversold reads the stock after two sales and returns sold - taken.
func (e Env) oversold(ctx context.Context, before int64, rs ...reply) (int64, string, error) {
	after, err := e.Redis.Get(ctx, e.StockKey).Int64()
	if err != nil {
		return 0, "", err
	}
	var sold, refused int64
	var parts []string
	for _, r := range rs {
		switch r.outcome {
		case api.Sold:
			sold++
		case api.Fenced:
			refused++
		}
		parts = append(parts, fmt.Sprint(r.status))
	}
	detail := fmt.Sprintf("replies %s, stock %d -> %d", strings.Join(parts, " "), before, after)
	if refused > 0 {
		detail += fmt.Sprintf(", %d stale write refused", refused)
	}
	return sold - (before - after), detail, nil
}
