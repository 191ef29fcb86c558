package main

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/locklab/locklab/internal/client"
	"github.com/locklab/locklab/internal/cluster"
	"github.com/locklab/locklab/internal/sale"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// holds is time spent holding a lock, and how many holds it was.
type holds struct {
	seconds float64
	count   uint64
}

// mean is the mean hold in microseconds (0 with no hold).
func (h holds) mean() float64 {
	if h.count == 0 {
		return 0
	}
	return h.seconds / float64(h.count) * 1e6
}

func (h holds) minus(o holds) holds { return holds{h.seconds - o.seconds, h.count - o.count} }

func (h holds) plus(o holds) holds { return holds{h.seconds + o.seconds, h.count + o.count} }

// holdMeter is the own ceilings' sale.Observer: it sums the holds, so a
// row's mean hold serially can be set beside its mean hold through nginx.
// One goroutine sells at a time.
type holdMeter struct{ holds }

func (h *holdMeter) Acquired(sale.Method, time.Duration, error) {}

func (h *holdMeter) Held(_ sale.Method, d time.Duration) {
	h.seconds += d.Seconds()
	h.count++
}

// The replicas' histograms the bench reads: time held per hold, and
// attempts per acquisition.
const (
	holdMetric     = "locklab_lock_hold_seconds"
	attemptsMetric = "locklab_lock_acquire_attempts"
)

// replicaHolds sums the histogram metric (holdMetric, attemptsMetric) for
// lock and wait over the replicas, read from each one's own /metrics: its
// sum in seconds (or attempts), and its count.
func replicaHolds(ctx context.Context, svc *client.Client, reps []cluster.Proc, metric, lock, wait string) (holds, error) {
	var sum holds
	for _, r := range reps {
		h, err := scrapeHolds(ctx, svc.At("http://"+r.Addr), metric, lock, wait)
		if err != nil {
			return holds{}, err
		}
		sum.seconds, sum.count = sum.seconds+h.seconds, sum.count+h.count
	}
	return sum, nil
}

func scrapeHolds(ctx context.Context, replica *client.Client, metric, lock, wait string) (holds, error) {
	families, err := scrape(ctx, replica)
	if err != nil {
		return holds{}, err
	}
	var h holds
	if mf := families[metric]; mf != nil {
		for _, m := range mf.GetMetric() {
			if label(m, "lock") == lock && label(m, "wait") == wait {
				h.seconds += m.GetHistogram().GetSampleSum()
				h.count += m.GetHistogram().GetSampleCount()
			}
		}
	}
	return h, nil
}

// roundTripsMetric counts the commands a replica sent to Redis.
const roundTripsMetric = "locklab_redis_round_trips_total"

// replicaCounter sums a counter, every label, over the replicas.
func replicaCounter(ctx context.Context, svc *client.Client, reps []cluster.Proc, metric string) (float64, error) {
	var sum float64
	for _, r := range reps {
		families, err := scrape(ctx, svc.At("http://"+r.Addr))
		if err != nil {
			return 0, err
		}
		if mf := families[metric]; mf != nil {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum, nil
}

// scrape reads one replica's /metrics, within 5 s.
func scrape(ctx context.Context, replica *client.Client) (map[string]*dto.MetricFamily, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	raw, err := replica.Metrics(ctx)
	if err != nil {
		return nil, fmt.Errorf("replica metrics: %w", err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("replica metrics %s: %w", replica.URL("metrics"), err)
	}
	return families, nil
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
