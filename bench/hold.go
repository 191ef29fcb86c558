package main

import (
	"context"
	"fmt"
	"net/http"
	"time"

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

// holdMeter is the own ceilings' sale.Observer: it sums the holds, so a
// row's mean hold serially can be set beside its mean hold through nginx.
// One goroutine sells at a time.
type holdMeter struct{ holds }

func (h *holdMeter) Acquired(sale.Method, time.Duration, error) {}

func (h *holdMeter) Held(_ sale.Method, d time.Duration) {
	h.seconds += d.Seconds()
	h.count++
}

// replicaHolds sums locklab_lock_hold_seconds for lock and wait over the
// replicas, read from each one's own /metrics.
func replicaHolds(ctx context.Context, client *http.Client, reps []cluster.Proc, lock, wait string) (holds, error) {
	var sum holds
	for _, r := range reps {
		h, err := scrapeHolds(ctx, client, "http://"+r.Addr+"/metrics", lock, wait)
		if err != nil {
			return holds{}, err
		}
		sum.seconds, sum.count = sum.seconds+h.seconds, sum.count+h.count
	}
	return sum, nil
}

func scrapeHolds(ctx context.Context, client *http.Client, url, lock, wait string) (holds, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return holds{}, err
	}
	res, err := client.Do(req)
	if err != nil {
		return holds{}, fmt.Errorf("replica metrics: %w", err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return holds{}, fmt.Errorf("replica metrics: GET %s: %s", url, res.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(res.Body)
	if err != nil {
		return holds{}, fmt.Errorf("replica metrics %s: %w", url, err)
	}
	var h holds
	if mf := families["locklab_lock_hold_seconds"]; mf != nil {
		for _, m := range mf.GetMetric() {
			if label(m, "lock") == lock && label(m, "wait") == wait {
				h.seconds += m.GetHistogram().GetSampleSum()
				h.count += m.GetHistogram().GetSampleCount()
			}
		}
	}
	return h, nil
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
