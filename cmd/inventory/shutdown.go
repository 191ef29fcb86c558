package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	_ "net/http/pprof" // served only with -pprof, on its own listener
	"sync"
	"time"

	"github.com/locklab/locklab/internal/sale"
	"github.com/locklab/locklab/internal/server"
)

// limits are the HTTP server's bounds, derived from the lock settings so
// that none of them cuts a legitimate sale short.
type limits struct {
	// Longest is the longest a sale can take: its wait for the lock, its
	// business time (or a chaos hold, at most server.MaxHold), its Redis
	// commands (a second each at most, redisconn's timeouts) and its release.
	Longest time.Duration
	// Grace is how long a stopping replica gives its holders to answer: a
	// waiter is cancelled at once, so only the hold counts. -grace sets it.
	Grace time.Duration
}

// redisSlack covers a sale's Redis commands: a read, a write, a fencing or
// nested step, each bounded by redisconn's one-second timeouts.
const redisSlack = 3 * time.Second

func (c config) limits() limits {
	hold := c.Work
	if c.Chaos { // a chaos hold replaces the business time
		hold = max(hold, server.MaxHold)
	}
	l := limits{
		Longest: c.AcquireTimeout + hold + redisSlack + sale.ReleaseTimeout,
		Grace:   hold + redisSlack + sale.ReleaseTimeout,
	}
	if c.Grace > 0 {
		l.Grace = c.Grace
	}
	return l
}

// The HTTP server's own limits. The idle timeout must stay above nginx's
// upstream keepalive_timeout (deploy/nginx.conf: 30s), so that nginx, not the
// service, closes an idle connection, and never sends a request on one the
// service is closing.
const (
	readHeaderTimeout = 5 * time.Second
	idleTimeout       = 75 * time.Second
	maxHeaderBytes    = 16 << 10
)

// apply sets srv's timeouts and header cap: a slow client cannot hold a
// connection forever, and a reply is never cut before the longest sale.
func (l limits) apply(srv *http.Server) {
	srv.ReadHeaderTimeout = readHeaderTimeout
	srv.ReadTimeout = readHeaderTimeout + 5*time.Second // the bodies are tiny (PUT /stock: 1 KiB at most)
	srv.WriteTimeout = l.Longest + 5*time.Second
	srv.IdleTimeout = idleTimeout
	srv.MaxHeaderBytes = maxHeaderBytes
}

// serveUntil serves on ln until ctx ends, then shuts down: stop cancels the
// requests still waiting, and in-flight sales get up to the grace period to
// finish and answer. Past it, their connections are closed (their clients
// never learn the outcome, as with a crash), but serveUntil still waits for
// every handler to return, each bounded by the longest sale, before its
// caller closes Redis: a holder is never left without the client it needs to
// write and release (v3's lock, which has no expiry, would stay forever).
func serveUntil(ctx context.Context, srv *http.Server, ln net.Listener, stop func(), running *inFlight, l limits, log *slog.Logger) error {
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down: cancelling waiters, finishing holders", "grace", l.Grace.String())
	stop()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.Grace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn("grace period over: closing the connections of the sales still running; each still finishes and releases its lock before Redis is closed",
			"grace", l.Grace.String(), "running", running.count())
		_ = srv.Close()
		if !running.wait(l.Longest) {
			return fmt.Errorf("shutdown: %d requests still running %s after the grace period", running.count(), l.Longest)
		}
		log.Info("stopped after the grace period: every sale still running finished")
		return nil
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	log.Info("stopped")
	return nil
}

// inFlight counts the requests inside the handler, so that shutdown can wait
// for them after http.Server has stopped tracking their connections.
type inFlight struct {
	mu   sync.Mutex
	n    int
	idle chan struct{} // closed while n is 0 and someone waits
}

func (f *inFlight) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.n++
		f.mu.Unlock()
		defer func() {
			f.mu.Lock()
			if f.n--; f.n == 0 && f.idle != nil {
				close(f.idle)
				f.idle = nil
			}
			f.mu.Unlock()
		}()
		next.ServeHTTP(w, r)
	})
}

func (f *inFlight) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}

// wait reports whether no request is inside within limit.
func (f *inFlight) wait(limit time.Duration) bool {
	f.mu.Lock()
	if f.n == 0 {
		f.mu.Unlock()
		return true
	}
	if f.idle == nil {
		f.idle = make(chan struct{})
	}
	idle := f.idle
	f.mu.Unlock()
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case <-idle:
		return true
	case <-t.C:
		return false
	}
}
