// Package metrics is the service's /metrics in the Prometheus format: what
// each lock version costs while it runs, so a dashboard shows the waiting and
// the failures that the load test's table only sums up.
package metrics

import (
	"context"
	"net/http"
	"time"

	"github.com/locklab/locklab/internal/api"
	"github.com/locklab/locklab/internal/sale"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
)

// Metrics holds the service's metrics, on a registry of its own (never the
// global one: two services in one test process must not collide).
type Metrics struct {
	reg      *prometheus.Registry
	sales    *prometheus.CounterVec
	fenced   *prometheus.CounterVec
	acquire  *prometheus.HistogramVec
	attempts *prometheus.HistogramVec
	hold     *prometheus.HistogramVec
	renewals prometheus.Counter
	lost     prometheus.Counter
	trips    *prometheus.CounterVec
}

// New returns the metrics, with the Go runtime's and the process's own.
func New() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		sales: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "locklab_sales_total",
			Help: "Sale requests by lock version, wait and outcome (sold, sold_out, lock_timeout, fenced, unavailable, ...).",
		}, []string{"lock", "wait", "outcome"}),
		fenced: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "locklab_fenced_refusals_total",
			Help: "Writes the stock refused because a newer lock holder had written (-fence): each is a lease that expired under its holder.",
		}, []string{"lock"}),
		acquire: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "locklab_lock_acquire_seconds",
			Help: "Time to obtain the lock (or give up), by lock version and wait.",
			// 100 us (one round trip) to 10 s (the default -acquire-timeout).
			Buckets: prometheus.ExponentialBucketsRange(0.0001, 10, 16),
		}, []string{"lock", "wait", "result"}),
		attempts: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "locklab_lock_acquire_attempts",
			Help:    "Attempts one acquisition made against Redis before it obtained the lock or gave up.",
			Buckets: []float64{1, 2, 3, 5, 10, 20, 50, 100, 200, 500},
		}, []string{"lock", "wait"}),
		hold: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "locklab_lock_hold_seconds",
			Help: "Time one sale held the lock, from obtaining it to its release returning: every other sale waits that long.",
			// 50 us (less than one round trip) to 30 s (past the default -ttl).
			Buckets: prometheus.ExponentialBucketsRange(0.00005, 30, 20),
		}, []string{"lock", "wait"}),
		renewals: prometheus.NewCounter(prometheus.CounterOpts{Name: "locklab_watchdog_renewals_total",
			Help: "Leases v8's watchdogs renewed."}),
		lost: prometheus.NewCounter(prometheus.CounterOpts{Name: "locklab_watchdog_lost_leases_total",
			Help: "Leases a v8 watchdog found gone (or could not renew for longer than the lease) while its owner still worked."}),
	}
	m.trips = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "locklab_redis_round_trips_total",
		Help: "Commands (or pipelines) this replica sent to Redis, by node: a script is one, whatever it runs inside Redis."},
		[]string{"node"})
	m.reg.MustRegister(m.sales, m.fenced, m.acquire, m.attempts, m.hold, m.renewals, m.lost, m.trips,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// RoundTrips returns a go-redis hook that counts every command the client
// sends to node, and every pipeline once, as one round trip (go-redis
// passes a pipeline through its pipeline hook only, not command by command:
// uncounted until issue 48, whose hand-off claim rides in one): Redis's own INFO commandstats also counts the
// commands a script runs inside Redis, and so cannot say how many times a
// sale went to Redis and back.
func (m *Metrics) RoundTrips(node string) redis.Hook {
	return roundTrips{m.trips.WithLabelValues(node)}
}

type roundTrips struct{ c prometheus.Counter }

func (roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.c.Inc()
		return next(ctx, cmd)
	}
}

func (h roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.c.Inc()
		return next(ctx, cmds)
	}
}

// Handler serves the metrics.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Acquired records one acquisition (sale.Observer).
func (m *Metrics) Acquired(meth sale.Method, took time.Duration, err error) {
	result := "obtained"
	if err != nil {
		result = "failed"
	}
	m.acquire.WithLabelValues(meth.Name, meth.Wait, result).Observe(took.Seconds())
}

// Attempts records how many attempts one acquisition made (builder.Observer).
func (m *Metrics) Attempts(lock, wait string, n int) {
	m.attempts.WithLabelValues(lock, wait).Observe(float64(n))
}

// Held records how long one sale held its lock (sale.Observer).
func (m *Metrics) Held(meth sale.Method, held time.Duration) {
	m.hold.WithLabelValues(meth.Name, meth.Wait).Observe(held.Seconds())
}

// Renewed counts one renewal by a v8 watchdog (builder.Observer).
func (m *Metrics) Renewed() { m.renewals.Inc() }

// LeaseLost counts one lease a v8 watchdog found lost (builder.Observer).
func (m *Metrics) LeaseLost() { m.lost.Inc() }

// Sale records one sale request's outcome: "sold" or the reply's error code.
func (m *Metrics) Sale(meth sale.Method, outcome string) {
	m.sales.WithLabelValues(meth.Name, meth.Wait, outcome).Inc()
	if outcome == api.CodeFenced {
		m.fenced.WithLabelValues(meth.Name).Inc()
	}
}

// Metrics is also the builder's Observer (builder.Observer): the service
// passes it there, which checks it; importing the builder here would link
// every lock into the metrics.
var _ sale.Observer = (*Metrics)(nil)
