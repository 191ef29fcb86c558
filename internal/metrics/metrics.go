// Package metrics is the service's /metrics in the Prometheus format: what
// each lock version costs while it runs, so a dashboard shows the waiting and
// the failures that the load test's table only sums up.
package metrics

import (
	"net/http"
	"time"

	"github.com/locklab/locklab/internal/sale"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
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
	}
	m.reg.MustRegister(m.sales, m.fenced, m.acquire, m.attempts, m.hold,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Handler serves the metrics.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Acquired records one acquisition (sale.Observer).
func (m *Metrics) Acquired(meth sale.Method, took time.Duration, attempts int, err error) {
	result := "obtained"
	if err != nil {
		result = "failed"
	}
	m.acquire.WithLabelValues(meth.Name, meth.Wait, result).Observe(took.Seconds())
	if attempts > 0 {
		m.attempts.WithLabelValues(meth.Name, meth.Wait).Observe(float64(attempts))
	}
}

// Held records how long one sale held its lock (sale.Observer).
func (m *Metrics) Held(meth sale.Method, held time.Duration) {
	m.hold.WithLabelValues(meth.Name, meth.Wait).Observe(held.Seconds())
}

// Sale records one sale request's outcome: "sold" or the reply's error code.
func (m *Metrics) Sale(meth sale.Method, outcome string) {
	m.sales.WithLabelValues(meth.Name, meth.Wait, outcome).Inc()
	if outcome == "fenced" {
		m.fenced.WithLabelValues(meth.Name).Inc()
	}
}

// Watchdog exports v8's watchdog counters, read when scraped: renewals and
// lost leases, summed over the functions given (one per v8 guard).
func (m *Metrics) Watchdog(renewals, lost []func() int64) {
	sum := func(fs []func() int64) func() float64 {
		return func() float64 {
			var n int64
			for _, f := range fs {
				n += f()
			}
			return float64(n)
		}
	}
	m.reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "locklab_watchdog_renewals_total",
			Help: "Leases v8's watchdogs renewed."}, sum(renewals)),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "locklab_watchdog_lost_leases_total",
			Help: "Leases a v8 watchdog found gone while its owner still worked."}, sum(lost)),
	)
}

var _ sale.Observer = (*Metrics)(nil)
