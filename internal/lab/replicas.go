package lab

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/locklab/locklab/internal/client"
)

// replicaFinder names the replicas the lab follows: the fixed list it was
// given (the local cluster's), or, with a DNS name (Config.ReplicasFrom),
// every address that name has now, each named by its own /healthz: a
// Compose service scaled to any size (docker compose up -d --scale
// inventory=N), or a Swarm service's tasks. The answer is kept a second, so
// the live timeline's ticks do not ask DNS each time.
type replicaFinder struct {
	fixed      []string
	host, port string
	svc        *client.Client // asks each address its name

	mu    sync.Mutex
	at    time.Time
	last  []string
	names map[string]string // address -> the name it last gave
}

// findEvery is how long one answer is kept.
const findEvery = time.Second

func newReplicaFinder(cfg Config, svc *client.Client) *replicaFinder {
	f := &replicaFinder{fixed: cfg.Replicas, svc: svc, names: map[string]string{}}
	if cfg.ReplicasFrom != "" {
		f.host, f.port, _ = net.SplitHostPort(cfg.ReplicasFrom) // checked by CheckReplicasFrom
	}
	return f
}

// CheckReplicasFrom says whether s is what Config.ReplicasFrom takes: a
// DNS name and the replicas' port.
func CheckReplicasFrom(s string) error {
	host, port, err := net.SplitHostPort(s)
	if err != nil || host == "" || port == "" {
		return fmt.Errorf("%q: want a DNS name and the replicas' port, such as inventory:8080", s)
	}
	return nil
}

// find returns the replicas' names, sorted. A replica that does not answer
// now (frozen, say) keeps the name its address last gave, so the page shows
// it as down instead of losing it; one gone from DNS (stopped, scaled away)
// is gone.
func (f *replicaFinder) find(ctx context.Context) []string {
	if f.host == "" {
		return f.fixed
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if time.Since(f.at) < findEvery {
		return f.last
	}
	// One caller's end (a page closed) is not the answer's: it serves all.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), healthTimeout)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupHost(ctx, f.host)
	var dnsErr *net.DNSError
	switch {
	case errors.As(err, &dnsErr) && dnsErr.IsNotFound:
		addrs = nil // none now: the service has no replica running
	case err != nil:
		return f.last // DNS did not answer: what it said last holds
	}
	asked := make([]string, len(addrs))
	var wg sync.WaitGroup
	for i, a := range addrs {
		wg.Go(func() { asked[i] = f.name(ctx, a) })
	}
	wg.Wait()
	names := map[string]string{}
	var out []string
	for i, a := range addrs {
		name := asked[i]
		if name == "" {
			name = f.names[a]
		}
		if name != "" {
			names[a] = name
			out = append(out, name)
		}
	}
	slices.Sort(out)
	f.names, f.last, f.at = names, slices.Compact(out), time.Now()
	return f.last
}

// name asks the replica at addr its name (GET /healthz); "" when it does
// not say.
func (f *replicaFinder) name(ctx context.Context, addr string) string {
	h, err := f.svc.At("http://" + net.JoinHostPort(addr, f.port)).Health(ctx)
	if err != nil {
		return ""
	}
	return h.Replica
}
